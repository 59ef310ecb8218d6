// CausalAttentionCuda: against a float64 reference; a paged decode step gives the prefill's bits
// for every position; a sequence's bits do not depend on the other sequences of the launch.
#include "model/kernels/attention_cuda.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace lockstep::kernels::cuda {
namespace {

using gpu_test::DeviceBuffer;
using gpu_test::RandomFloats;

constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 64;
constexpr int64_t kRowFloats = kKvHeads * kHeadDim;

// A batch of sequences over one shared key/value cache (host side).
struct Batch {
  std::vector<float> q;  // [tokens, heads, dim]
  std::vector<int64_t> cu_seqlens{0};
  std::vector<int64_t> first_positions;
  std::vector<int64_t> key_rows;  // flat
  std::vector<int64_t> key_row_offsets;

  // Adds `num_queries` queries (taken from `queries`, [n, heads, dim]) of a sequence whose
  // positions 0 .. first + n - 1 live in cache rows `rows`.
  void Add(const float* queries, int64_t num_queries, int64_t first,
           const std::vector<int64_t>& rows) {
    q.insert(q.end(), queries, queries + num_queries * kHeads * kHeadDim);
    cu_seqlens.push_back(cu_seqlens.back() + num_queries);
    first_positions.push_back(first);
    key_row_offsets.push_back(static_cast<int64_t>(key_rows.size()));
    key_rows.insert(key_rows.end(), rows.begin(), rows.end());
  }
};

std::vector<float> RunAttention(const Batch& b, const DeviceBuffer<float>& keys,
                                const DeviceBuffer<float>& values) {
  DeviceBuffer<float> dq(b.q), dout(b.q.size());
  DeviceBuffer<int64_t> dcu(b.cu_seqlens), dfirst(b.first_positions), drows(b.key_rows),
      doffsets(b.key_row_offsets);
  AttentionCudaProblem p;
  p.q = dq.get();
  p.num_tokens = b.cu_seqlens.back();
  p.num_sequences = static_cast<int64_t>(b.first_positions.size());
  p.cu_seqlens = dcu.get();
  p.first_positions = dfirst.get();
  p.key_rows = drows.get();
  p.key_row_offsets = doffsets.get();
  p.keys = keys.get();
  p.values = values.get();
  p.kv_row_stride = kRowFloats;
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  p.out = dout.get();
  KernelStatus status = CausalAttentionCuda(p, nullptr);
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dout.ToHost();
}

// A scattered block table: position j of a sequence lives in row rows[j] (16-slot blocks).
std::vector<int64_t> PagedRows(int64_t length, int64_t first_block) {
  std::vector<int64_t> rows(length);
  for (int64_t j = 0; j < length; ++j) rows[j] = ((first_block + 3 * (j / 16)) % 200) * 16 + j % 16;
  return rows;
}

TEST(AttentionCudaTest, MatchesFloat64Reference) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t length = 600;  // three key tiles, the last partial
  const auto keys = RandomFloats(3200 * kRowFloats, 1), values = RandomFloats(3200 * kRowFloats, 2);
  const auto q = RandomFloats(length * kHeads * kHeadDim, 3);
  DeviceBuffer<float> dk(keys), dv(values);
  const auto rows = PagedRows(length, 5);
  Batch b;
  b.Add(q.data(), length, 0, rows);
  const auto out = RunAttention(b, dk, dv);
  const double scale = 1.0 / std::sqrt(double{kHeadDim});
  for (int64_t i = 0; i < length; i += 29) {
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      std::vector<double> s(i + 1);
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < kHeadDim; ++d) {
          dot += double{q[(i * kHeads + h) * kHeadDim + d]} *
                 keys[rows[j] * kRowFloats + g * kHeadDim + d];
        }
        s[j] = dot * scale;
      }
      const double m = *std::max_element(s.begin(), s.end());
      double l = 0;
      for (double& v : s) l += (v = std::exp(v - m));
      for (int64_t d = 0; d < kHeadDim; ++d) {
        double ref = 0;
        for (int64_t j = 0; j <= i; ++j)
          ref += s[j] * values[rows[j] * kRowFloats + g * kHeadDim + d];
        ref /= l;
        // Stated tolerance: 2e-5 absolute (values ~N(0,1); up to 600 fp32 terms, each softmax
        // weight within a few ulp).
        ASSERT_NEAR(out[(i * kHeads + h) * kHeadDim + d], ref, 2e-5) << i << " " << h << " " << d;
      }
    }
  }
}

TEST(AttentionCudaTest, DecodeEqualsPrefillBitwise) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t length = 300;
  DeviceBuffer<float> dk(RandomFloats(3200 * kRowFloats, 4)),
      dv(RandomFloats(3200 * kRowFloats, 5));
  const auto q = RandomFloats(length * kHeads * kHeadDim, 6);
  const auto rows = PagedRows(length, 11);
  Batch prefill;
  prefill.Add(q.data(), length, 0, rows);
  const auto prefilled = RunAttention(prefill, dk, dv);
  const int64_t item = kHeads * kHeadDim;
  for (int64_t position = 0; position < length; ++position) {
    Batch decode;  // one query at `position`, as a decode step asks it
    decode.Add(&q[position * item], 1, position,
               std::vector<int64_t>(rows.begin(), rows.begin() + position + 1));
    const auto decoded = RunAttention(decode, dk, dv);
    ASSERT_TRUE(gpu_test::SameBits(decoded.data(), &prefilled[position * item], item))
        << "position " << position;
  }
}

TEST(AttentionCudaTest, SequenceBitsDoNotDependOnTheRestOfTheBatch) {
  LOCKSTEP_REQUIRE_GPUS(1);
  DeviceBuffer<float> dk(RandomFloats(3200 * kRowFloats, 7)),
      dv(RandomFloats(3200 * kRowFloats, 8));
  const int64_t item = kHeads * kHeadDim;
  const auto q = RandomFloats(400 * item, 9);
  const auto rows = PagedRows(400, 17);
  // A chunked prefill of positions 200 .. 263 (a prefix-cached sequence), alone.
  Batch alone;
  alone.Add(&q[200 * item], 64, 200, std::vector<int64_t>(rows.begin(), rows.begin() + 264));
  const auto reference = RunAttention(alone, dk, dv);
  for (int64_t others : {int64_t{1}, int64_t{6}, int64_t{63}, int64_t{999}}) {
    Batch mixed;
    const auto noise = RandomFloats(others * item, 10 + others);
    for (int64_t s = 0; s < others / 2; ++s) {  // decode steps of other sequences before it
      mixed.Add(&noise[s * item], 1, s % 300, PagedRows(s % 300 + 1, 40 + s));
    }
    mixed.Add(&q[200 * item], 64, 200, std::vector<int64_t>(rows.begin(), rows.begin() + 264));
    const int64_t at = mixed.cu_seqlens[mixed.cu_seqlens.size() - 2];
    for (int64_t s = others / 2; s < others; ++s) {  // and after it
      mixed.Add(&noise[s * item], 1, s % 300, PagedRows(s % 300 + 1, 40 + s));
    }
    const auto out = RunAttention(mixed, dk, dv);
    ASSERT_TRUE(gpu_test::SameBits(&out[at * item], reference.data(), reference.size()))
        << "with " << others << " other sequences";
  }
}

TEST(AttentionCudaTest, RejectsBadShapesBeforeLaunching) {
  AttentionCudaProblem p;
  p.num_tokens = 1;
  p.num_heads = 6;
  p.num_kv_heads = 4;
  p.head_dim = 64;
  p.kv_row_stride = 256;
  EXPECT_NE(CausalAttentionCuda(p, nullptr).message.find("num_kv_heads must divide"),
            std::string::npos);
  p.num_kv_heads = 2;
  p.head_dim = 512;
  p.kv_row_stride = 1024;
  EXPECT_EQ(CausalAttentionCuda(p, nullptr).code, KernelStatus::kInvalidArgument);
  p.head_dim = 64;
  p.num_sequences = 1;
  EXPECT_NE(CausalAttentionCuda(p, nullptr).message.find("must be set"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::kernels::cuda
