// CausalAttentionItems: accuracy against double, and one query's bits are the
// same in a training-style call (all queries, contiguous keys), a decode-style
// call (one query at first_position = t), chunked paged prefill with keys in
// scattered cache slots, arbitrary item splits, and every SIMD level.
#include "model/kernels/attention_cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "tests/kernels/bit_test_util.h"

namespace lockstep::kernels {
namespace {

using testing::AvailableSimdLevels;
using testing::RandomFloats;
using testing::SameBits;
using testing::ScopedSimdLevel;

struct Shape {
  int64_t length, num_heads, num_kv_heads, head_dim;
};

// GQA and MHA, head dims that are multiples of 16 and ones with 8-wide or odd
// tails.
const Shape kShapes[] = {{37, 4, 2, 64},  {20, 6, 6, 40}, {33, 8, 2, 128},
                         {50, 2, 1, 32},  {17, 3, 1, 72}, {9, 2, 2, 5},
                         {19, 4, 1, 256}, {21, 6, 2, 48}};

// One sequence: q [L, H, d], k and v [L, KV, d], contiguous.
struct Sequence {
  Shape shape;
  std::vector<float> q, k, v;
  int64_t QueryFloats() const { return shape.num_heads * shape.head_dim; }
  int64_t KvFloats() const { return shape.num_kv_heads * shape.head_dim; }
  float Scale() const {
    return 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  }
};

Sequence MakeSequence(const Shape& shape, uint32_t seed) {
  Sequence s{shape};
  s.q = RandomFloats(shape.length * s.QueryFloats(), -3.0f, 3.0f, seed);
  s.k = RandomFloats(shape.length * s.KvFloats(), -1.0f, 1.0f, seed + 1);
  s.v = RandomFloats(shape.length * s.KvFloats(), -1.0f, 1.0f, seed + 2);
  return s;
}

// Training-style: all L queries from position 0, keys contiguous.
std::vector<float> RunTraining(const Sequence& s) {
  std::vector<int64_t> rows(s.shape.length);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> out(s.q.size());
  AttentionProblem p;
  p.q = s.q.data();
  p.num_queries = s.shape.length;
  p.first_position = 0;
  p.keys = s.k.data();
  p.values = s.v.data();
  p.kv_row_stride = s.KvFloats();
  p.key_rows = rows.data();
  p.num_heads = s.shape.num_heads;
  p.num_kv_heads = s.shape.num_kv_heads;
  p.head_dim = s.shape.head_dim;
  p.scale = s.Scale();
  p.out = out.data();
  CausalAttentionItems(p, 0, s.shape.length * s.shape.num_heads);
  return out;
}

// Paged: keys/values copied into cache slots (a permutation of a bigger buffer
// with padded rows), queries computed in chunks [c, c + chunk) with
// first_position = c, items of each chunk in pieces of `item_piece` (so chunk
// == 1 is token-by-token decode).
std::vector<float> RunPaged(const Sequence& s, int64_t chunk,
                            int64_t item_piece, uint32_t seed) {
  const int64_t num_slots = 3 * s.shape.length + 5;
  const int64_t stride = s.KvFloats() + 8;
  std::vector<int64_t> slots(num_slots);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(seed));
  slots.resize(s.shape.length);
  std::vector<float> cache_k =
      RandomFloats(num_slots * stride, -9.0f, 9.0f, seed + 1);
  std::vector<float> cache_v =
      RandomFloats(num_slots * stride, -9.0f, 9.0f, seed + 2);
  for (int64_t j = 0; j < s.shape.length; ++j) {
    std::copy_n(&s.k[j * s.KvFloats()], s.KvFloats(),
                &cache_k[slots[j] * stride]);
    std::copy_n(&s.v[j * s.KvFloats()], s.KvFloats(),
                &cache_v[slots[j] * stride]);
  }
  std::vector<float> out(s.q.size());
  for (int64_t c = 0; c < s.shape.length; c += chunk) {
    const int64_t n = std::min(chunk, s.shape.length - c);
    std::vector<float> q(s.q.begin() + c * s.QueryFloats(),
                         s.q.begin() + (c + n) * s.QueryFloats());
    std::vector<float> chunk_out(q.size());
    AttentionProblem p;
    p.q = q.data();
    p.num_queries = n;
    p.first_position = c;
    p.keys = cache_k.data();
    p.values = cache_v.data();
    p.kv_row_stride = stride;
    p.key_rows = slots.data();
    p.num_heads = s.shape.num_heads;
    p.num_kv_heads = s.shape.num_kv_heads;
    p.head_dim = s.shape.head_dim;
    p.scale = s.Scale();
    p.out = chunk_out.data();
    const int64_t items = n * s.shape.num_heads;
    for (int64_t begin = 0; begin < items; begin += item_piece) {
      CausalAttentionItems(p, begin, std::min(items, begin + item_piece));
    }
    std::copy(chunk_out.begin(), chunk_out.end(),
              out.begin() + c * s.QueryFloats());
  }
  return out;
}

TEST(AttentionTest, MatchesDoubleReference) {
  for (const Shape& shape : kShapes) {
    const Sequence s = MakeSequence(shape, 100 + shape.head_dim);
    const std::vector<float> out = RunTraining(s);
    const int64_t d = shape.head_dim,
                  group = shape.num_heads / shape.num_kv_heads;
    double worst = 0;
    for (int64_t i = 0; i < shape.length; ++i) {
      for (int64_t h = 0; h < shape.num_heads; ++h) {
        const float* q = &s.q[(i * shape.num_heads + h) * d];
        const int64_t g = h / group;
        std::vector<double> p(i + 1);
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += double(q[x]) * s.k[(j * shape.num_kv_heads + g) * d + x];
          p[j] = dot * s.Scale();
          m = std::max(m, p[j]);
        }
        double l = 0;
        for (double& e : p) l += (e = std::exp(e - m));
        for (int64_t x = 0; x < d; ++x) {
          double ref = 0;
          for (int64_t j = 0; j <= i; ++j)
            ref += p[j] * s.v[(j * shape.num_kv_heads + g) * d + x];
          ref /= l;
          const double err =
              std::fabs(out[(i * shape.num_heads + h) * d + x] - ref);
          worst = std::max(worst, err);
          ASSERT_LE(err, 2e-6)
              << "d " << d << " query " << i << " head " << h << " dim " << x;
        }
      }
    }
    char worst_text[32];
    std::snprintf(worst_text, sizeof(worst_text), "%.3g", worst);
    RecordProperty("max_abs_error_d" + std::to_string(d), worst_text);
  }
}

TEST(AttentionTest, TrainingDecodeAndPagedPrefillGiveSameBits) {
  for (const Shape& shape : kShapes) {
    const Sequence s = MakeSequence(shape, 200 + shape.head_dim);
    const std::vector<float> training = RunTraining(s);
    // Token-by-token decode, one item at a time and all heads at once.
    EXPECT_TRUE(SameBits(RunPaged(s, 1, 1, 1), training))
        << "decode, d " << shape.head_dim;
    EXPECT_TRUE(SameBits(RunPaged(s, 1, shape.num_heads, 2), training))
        << "decode";
    // Chunked prefill with chunk sizes 7, 64 (whole prompt) and odd item
    // splits.
    EXPECT_TRUE(SameBits(RunPaged(s, 7, 5, 3), training))
        << "chunk 7, d " << shape.head_dim;
    EXPECT_TRUE(SameBits(RunPaged(s, 64, 1000, 4), training)) << "whole prompt";
    EXPECT_TRUE(SameBits(RunPaged(s, 64, 3, 5), training))
        << "item pieces of 3";
  }
}

TEST(AttentionTest, QueryBitsIndependentOfLaterTokens) {
  // The same prefix inside a longer sequence: outputs for the prefix positions
  // are identical.
  const Shape shape{40, 4, 2, 64};
  const Sequence full = MakeSequence(shape, 300);
  Sequence prefix = full;
  prefix.shape.length = 11;
  prefix.q.resize(11 * full.QueryFloats());
  prefix.k.resize(11 * full.KvFloats());
  prefix.v.resize(11 * full.KvFloats());
  const std::vector<float> a = RunTraining(full);
  const std::vector<float> b = RunTraining(prefix);
  EXPECT_TRUE(SameBits(a.data(), b.data(), static_cast<int64_t>(b.size())));
}

TEST(AttentionTest, EverySimdLevelGivesSameBits) {
  for (const Shape& shape : kShapes) {
    const Sequence s = MakeSequence(shape, 400 + shape.head_dim);
    std::vector<float> reference;
    {
      ScopedSimdLevel level(SimdLevel::kPortable);
      reference = RunTraining(s);
    }
    for (SimdLevel level : AvailableSimdLevels()) {
      ScopedSimdLevel scoped(level);
      EXPECT_TRUE(SameBits(RunTraining(s), reference))
          << "d " << shape.head_dim << " level " << int(level);
      EXPECT_TRUE(SameBits(RunPaged(s, 1, 2, 6), reference))
          << "decode, d " << shape.head_dim << " level " << int(level);
    }
  }
}

}  // namespace
}  // namespace lockstep::kernels
