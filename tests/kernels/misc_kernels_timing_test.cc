// Rough single-thread timings of the batch-invariant RMSNorm, SiLU·mul,
// log-softmax and attention kernels, at every SIMD level. Disabled by default;
// run with
//   kernels_misc_test --gtest_also_run_disabled_tests --gtest_filter='*Timing*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "model/kernels/attention_cpu.h"
#include "model/kernels/log_softmax_cpu.h"
#include "model/kernels/rms_norm_cpu.h"
#include "model/kernels/silu_mul_cpu.h"
#include "tests/kernels/bit_test_util.h"

namespace lockstep::kernels {
namespace {

using testing::AvailableSimdLevels;
using testing::RandomFloats;
using testing::ScopedSimdLevel;

const char* LevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

// Best of `reps` runs, in milliseconds.
template <typename Fn>
double BestMs(int reps, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const auto stop = std::chrono::steady_clock::now();
    best = std::min(
        best, std::chrono::duration<double, std::milli>(stop - start).count());
  }
  return best;
}

TEST(MiscKernelsTiming, DISABLED_LogSoftmax2048x32000) {
  const int64_t rows = 2048, vocab = 32000;
  const std::vector<float> logits =
      RandomFloats(rows * vocab, -10.0f, 10.0f, 1);
  std::vector<int64_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = (r * 7919) % vocab;
  std::vector<float> out(rows), full(rows * vocab);
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    const int reps = level == SimdLevel::kPortable ? 1 : 3;
    for (float t : {1.0f, 0.7f}) {
      const double target_ms = BestMs(reps, [&] {
        TargetLogProbsRows(logits.data(), targets.data(), out.data(), vocab, t,
                           0, rows);
      });
      const double full_ms = BestMs(reps, [&] {
        LogSoftmaxRows(logits.data(), full.data(), vocab, t, 0, rows);
      });
      std::printf(
          "log_softmax %ldx%ld T=%.1f %-8s target %8.1f ms (%.2f Gelem/s)  "
          "full row %8.1f ms\n",
          rows, vocab, t, LevelName(level), target_ms,
          rows * vocab / target_ms / 1e6, full_ms);
    }
  }
}

TEST(MiscKernelsTiming, DISABLED_RmsNormAndSiluMul) {
  const int64_t rows = 2048, dim = 2048, inter = 5632;
  const std::vector<float> x = RandomFloats(rows * dim, -3.0f, 3.0f, 2);
  const std::vector<float> w = RandomFloats(dim, 0.5f, 1.5f, 3);
  const std::vector<float> gate = RandomFloats(rows * inter, -8.0f, 8.0f, 4);
  const std::vector<float> up = RandomFloats(rows * inter, -3.0f, 3.0f, 5);
  std::vector<float> y(rows * dim), h(rows * inter);
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    const double norm_ms = BestMs(3, [&] {
      RmsNormRows(x.data(), w.data(), y.data(), dim, 1e-6, 0, rows);
    });
    const double silu_ms = BestMs(
        3, [&] { SiluMul(gate.data(), up.data(), h.data(), 0, rows * inter); });
    std::printf(
        "rms_norm %ldx%ld %-8s %7.2f ms   silu_mul %ldx%ld %7.2f ms (%.2f "
        "Gelem/s)\n",
        rows, dim, LevelName(level), norm_ms, rows, inter, silu_ms,
        rows * inter / silu_ms / 1e6);
  }
}

// Decode: num_seqs sequences, each one query at position ctx - 1, keys in
// scattered cache slots. Prefill: one sequence of `length` queries from
// position 0, contiguous keys.
TEST(MiscKernelsTiming, DISABLED_Attention) {
  struct Case {
    const char* name;
    int64_t num_seqs, ctx, queries, num_heads, num_kv_heads, head_dim;
  };
  const Case cases[] = {{"decode", 8, 128, 1, 12, 12, 64},
                        {"decode", 8, 1024, 1, 12, 4, 64},
                        {"decode", 8, 1024, 1, 16, 8, 128},
                        {"prefill", 1, 512, 512, 12, 4, 64}};
  for (const Case& c : cases) {
    const int64_t kv_floats = c.num_kv_heads * c.head_dim;
    const int64_t num_slots = c.num_seqs * c.ctx;
    const std::vector<float> cache_k =
        RandomFloats(num_slots * kv_floats, -1.0f, 1.0f, 6);
    const std::vector<float> cache_v =
        RandomFloats(num_slots * kv_floats, -1.0f, 1.0f, 7);
    std::vector<int64_t> slots(num_slots);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), std::mt19937(8));
    const int64_t q_floats = c.queries * c.num_heads * c.head_dim;
    const std::vector<float> q =
        RandomFloats(c.num_seqs * q_floats, -2.0f, 2.0f, 9);
    std::vector<float> out(q.size());
    for (SimdLevel level : AvailableSimdLevels()) {
      ScopedSimdLevel scoped(level);
      const double ms = BestMs(level == SimdLevel::kPortable ? 1 : 5, [&] {
        for (int64_t s = 0; s < c.num_seqs; ++s) {
          AttentionProblem p;
          p.q = q.data() + s * q_floats;
          p.num_queries = c.queries;
          p.first_position = c.ctx - c.queries;
          p.keys = cache_k.data();
          p.values = cache_v.data();
          p.kv_row_stride = kv_floats;
          p.key_rows = slots.data() + s * c.ctx;
          p.num_heads = c.num_heads;
          p.num_kv_heads = c.num_kv_heads;
          p.head_dim = c.head_dim;
          p.scale = 0.125f;
          p.out = out.data() + s * q_floats;
          CausalAttentionItems(p, 0, c.queries * c.num_heads);
        }
      });
      // Key-query pairs visited (causal), 4 flops per pair per dim (q.k and
      // p.v).
      const double pairs =
          c.num_seqs * c.num_heads *
          (c.queries * (c.ctx - c.queries) + c.queries * (c.queries + 1) / 2.0);
      std::printf(
          "attention %-7s %ld seqs ctx %4ld q %3ld heads %2ld/%ld d %3ld %-8s "
          "%8.3f ms (%.1f GFLOP/s)\n",
          c.name, c.num_seqs, c.ctx, c.queries, c.num_heads, c.num_kv_heads,
          c.head_dim, LevelName(level), ms, pairs * 4 * c.head_dim / ms / 1e6);
    }
  }
}

}  // namespace
}  // namespace lockstep::kernels
