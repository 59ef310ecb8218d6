// bench_misc_kernels: single-thread timings of the batch-invariant RMSNorm, SiLU·mul, log-softmax
// and attention kernels, at every SIMD level this CPU runs (portable, AVX2, AVX-512), best of
// --reps runs each (the portable level once: it is the slow reference).
//
//   bench_misc_kernels [--only log_softmax|norm_silu|attention] [--rows 2048] [--reps 3]
//
// --rows sets the rows of the log-softmax (vocabulary 32000) and of the RMSNorm / SiLU·mul
// (hidden 2048, intermediate 5632); the attention cases are fixed (decode: 8 sequences, one query
// each at the end of its context, keys in scattered cache slots; prefill: one sequence of 512
// queries from position 0).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "model/kernels/attention_cpu.h"
#include "model/kernels/deterministic_math_cpu.h"
#include "model/kernels/log_softmax_cpu.h"
#include "model/kernels/rms_norm_cpu.h"
#include "model/kernels/silu_mul_cpu.h"
#include "tests/kernels/simd_levels.h"

namespace lockstep::bench {
namespace {

using kernels::SimdLevel;
using kernels::testing::AvailableSimdLevels;
using kernels::testing::RandomFloats;
using kernels::testing::ScopedSimdLevel;

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

// Best of `reps` runs of fn, in milliseconds.
template <typename Fn>
double BestMs(int reps, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

struct Flags {
  std::string only;
  int64_t rows = 2048;
  int reps = 3;
};

int RepsAt(SimdLevel level, const Flags& flags) {
  return level == SimdLevel::kPortable ? 1 : flags.reps;
}

void LogSoftmax(const Flags& flags) {
  const int64_t rows = flags.rows, vocab = 32000;
  const std::vector<float> logits = RandomFloats(rows * vocab, -10.0f, 10.0f, 1);
  std::vector<int64_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = (r * 7919) % vocab;
  std::vector<float> out(rows), full(rows * vocab);
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    for (float t : {1.0f, 0.7f}) {
      const double target_ms = BestMs(RepsAt(level, flags), [&] {
        kernels::TargetLogProbsRows(logits.data(), targets.data(), out.data(), vocab, t, 0, rows);
      });
      const double full_ms = BestMs(RepsAt(level, flags), [&] {
        kernels::LogSoftmaxRows(logits.data(), full.data(), vocab, t, 0, rows);
      });
      std::printf(
          "log_softmax %ldx%ld T=%.1f %-8s target %8.2f ms (%.2f Gelem/s)  full row %8.2f ms\n",
          static_cast<long>(rows), static_cast<long>(vocab), t, LevelName(level), target_ms,
          rows * vocab / target_ms / 1e6, full_ms);
    }
  }
}

void NormSilu(const Flags& flags) {
  const int64_t rows = flags.rows, dim = 2048, inter = 5632;
  const std::vector<float> x = RandomFloats(rows * dim, -3.0f, 3.0f, 2);
  const std::vector<float> w = RandomFloats(dim, 0.5f, 1.5f, 3);
  const std::vector<float> gate = RandomFloats(rows * inter, -8.0f, 8.0f, 4);
  const std::vector<float> up = RandomFloats(rows * inter, -3.0f, 3.0f, 5);
  std::vector<float> y(rows * dim), h(rows * inter);
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    const double norm_ms = BestMs(RepsAt(level, flags), [&] {
      kernels::RmsNormRows(x.data(), w.data(), y.data(), dim, 1e-6, 0, rows);
    });
    const double silu_ms = BestMs(RepsAt(level, flags), [&] {
      kernels::SiluMul(gate.data(), up.data(), h.data(), 0, rows * inter);
    });
    std::printf("rms_norm %ldx%ld %-8s %7.2f ms   silu_mul %ldx%ld %7.2f ms (%.2f Gelem/s)\n",
                static_cast<long>(rows), static_cast<long>(dim), LevelName(level), norm_ms,
                static_cast<long>(rows), static_cast<long>(inter), silu_ms,
                rows * inter / silu_ms / 1e6);
  }
}

void Attention(const Flags& flags) {
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
    const std::vector<float> cache_k = RandomFloats(num_slots * kv_floats, -1.0f, 1.0f, 6);
    const std::vector<float> cache_v = RandomFloats(num_slots * kv_floats, -1.0f, 1.0f, 7);
    std::vector<int64_t> slots(num_slots);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), std::mt19937(8));
    const int64_t q_floats = c.queries * c.num_heads * c.head_dim;
    const std::vector<float> q = RandomFloats(c.num_seqs * q_floats, -2.0f, 2.0f, 9);
    std::vector<float> out(q.size());
    for (SimdLevel level : AvailableSimdLevels()) {
      ScopedSimdLevel scoped(level);
      const double ms = BestMs(RepsAt(level, flags), [&] {
        for (int64_t s = 0; s < c.num_seqs; ++s) {
          kernels::AttentionProblem p;
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
          kernels::CausalAttentionItems(p, 0, c.queries * c.num_heads);
        }
      });
      // Key-query pairs visited (causal), 4 flops per pair and dimension (q.k and p.v).
      const double pairs = c.num_seqs * c.num_heads *
                           (c.queries * (c.ctx - c.queries) + c.queries * (c.queries + 1) / 2.0);
      std::printf("attention %-7s %ld seqs ctx %4ld q %3ld heads %2ld/%ld d %3ld %-8s %8.3f ms "
                  "(%.1f GFLOP/s)\n",
                  c.name, static_cast<long>(c.num_seqs), static_cast<long>(c.ctx),
                  static_cast<long>(c.queries), static_cast<long>(c.num_heads),
                  static_cast<long>(c.num_kv_heads), static_cast<long>(c.head_dim),
                  LevelName(level), ms, pairs * 4 * c.head_dim / ms / 1e6);
    }
  }
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep::bench;
  Flags flags;
  CLI::App app{"Single-thread timings of the batch-invariant norm, SiLU-mul, log-softmax and "
               "attention kernels at every SIMD level"};
  app.add_option("--only", flags.only, "Run one family")
      ->check(CLI::IsMember({"log_softmax", "norm_silu", "attention"}));
  app.add_option("--rows", flags.rows, "Rows of the log-softmax and the norm / SiLU-mul")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--reps", flags.reps, "Runs per figure (the portable level runs once)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  std::printf("bench_misc_kernels: 1 thread, best of %d runs, SIMD levels up to %s\n", flags.reps,
              LevelName(lockstep::kernels::SupportedSimdLevel()));
  if (flags.only.empty() || flags.only == "log_softmax") LogSoftmax(flags);
  if (flags.only.empty() || flags.only == "norm_silu") NormSilu(flags);
  if (flags.only.empty() || flags.only == "attention") Attention(flags);
  return 0;
}
