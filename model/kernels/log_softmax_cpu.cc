// Batch-invariant log-softmax over the vocabulary (see log_softmax_cpu.h).
//
// Per row, all fp32, with s_j = logits_j / T (the division is skipped when T ==
// 1: x / 1 == x):
//   pass 1: mx = max_j logits_j    canonical 64-lane order, a > b ? a : b
//   (exact; T > 0 and
//           m = mx / T             rounding is monotone, so m == max_j s_j bit
//           for bit)
//   pass 2: sum = sum_j exp(s_j - m)   canonical 64-lane order: acc[j % 64] +=
//   exp(s_j - m) in
//           increasing j, then the pairwise tree 32, 16, ..., 1
//           (deterministic_math_cpu.h)
//   out_j = (s_j - m) - log(sum)
// exp is DeterministicExp / ExpAvx2 / ExpAvx512 (identical bits), log is
// std::log(float) once per row. The order depends only on vocab, so every SIMD
// level, row range and thread count gives the same bits, and TargetLogProbsRows
// equals LogSoftmaxRows at the target bit for bit (both call RowStats and
// OutputValue). A target outside [0, vocab) yields NaN.
#include "model/kernels/log_softmax_cpu.h"

#include <cmath>
#include <limits>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

constexpr int kLanes = kReduceLanes;

struct RowStats {
  float max;      // m = max_j s_j
  float log_sum;  // log(sum_j exp(s_j - m))
};

// ---- pass 1: max of raw logits over the 64-lane body
// --------------------------------------------

void MaxBodyPortable(const float* x, int64_t num_blocks, float* acc) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int l = 0; l < kLanes; ++l) acc[l] = MaxOf(acc[l], x[b * kLanes + l]);
  }
}

LOCKSTEP_TARGET_AVX2 void MaxBodyAvx2(const float* x, int64_t num_blocks,
                                      float* acc) {
  __m256 a[8];
  for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(acc + 8 * k);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int k = 0; k < 8; ++k)
      a[k] = _mm256_max_ps(a[k], _mm256_loadu_ps(x + b * kLanes + 8 * k));
  }
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(acc + 8 * k, a[k]);
}

LOCKSTEP_TARGET_AVX512 void MaxBodyAvx512(const float* x, int64_t num_blocks,
                                          float* acc) {
  __m512 a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm512_loadu_ps(acc + 16 * k);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int k = 0; k < 4; ++k) {
      a[k] = _mm512_max_ps(a[k], _mm512_loadu_ps(x + b * kLanes + 16 * k));
    }
  }
  for (int k = 0; k < 4; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
}

// ---- pass 2: sum of exp(s_j - m) over the 64-lane body
// ------------------------------------------

inline float ShiftedScalar(float x, float temperature, bool scaled, float m) {
  return (scaled ? x / temperature : x) - m;
}

void ExpSumBodyPortable(const float* x, int64_t num_blocks, float temperature,
                        bool scaled, float m, float* acc) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int l = 0; l < kLanes; ++l) {
      acc[l] = acc[l] + DeterministicExp(ShiftedScalar(x[b * kLanes + l],
                                                       temperature, scaled, m));
    }
  }
}

LOCKSTEP_TARGET_AVX2 void ExpSumBodyAvx2(const float* x, int64_t num_blocks,
                                         float temperature, bool scaled,
                                         float m, float* acc) {
  const __m256 vt = _mm256_set1_ps(temperature);
  const __m256 vm = _mm256_set1_ps(m);
  __m256 a[8];
  for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(acc + 8 * k);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int k = 0; k < 8; ++k) {
      __m256 s = _mm256_loadu_ps(x + b * kLanes + 8 * k);
      if (scaled) s = _mm256_div_ps(s, vt);
      a[k] = _mm256_add_ps(a[k], ExpAvx2(_mm256_sub_ps(s, vm)));
    }
  }
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(acc + 8 * k, a[k]);
}

LOCKSTEP_TARGET_AVX512 void ExpSumBodyAvx512(const float* x, int64_t num_blocks,
                                             float temperature, bool scaled,
                                             float m, float* acc) {
  const __m512 vt = _mm512_set1_ps(temperature);
  const __m512 vm = _mm512_set1_ps(m);
  __m512 a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm512_loadu_ps(acc + 16 * k);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int k = 0; k < 4; ++k) {
      __m512 s = _mm512_loadu_ps(x + b * kLanes + 16 * k);
      if (scaled) s = _mm512_div_ps(s, vt);
      a[k] = _mm512_add_ps(a[k], ExpAvx512(_mm512_sub_ps(s, vm)));
    }
  }
  for (int k = 0; k < 4; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
}

RowStats ComputeRowStats(const float* x, int64_t vocab, float temperature,
                         SimdLevel level) {
  const int64_t num_blocks = vocab / kLanes;
  const bool scaled = temperature != 1.0f;

  float acc[kLanes];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  switch (level) {
    case SimdLevel::kAvx512:
      MaxBodyAvx512(x, num_blocks, acc);
      break;
    case SimdLevel::kAvx2:
      MaxBodyAvx2(x, num_blocks, acc);
      break;
    default:
      MaxBodyPortable(x, num_blocks, acc);
      break;
  }
  for (int64_t j = num_blocks * kLanes; j < vocab; ++j) {
    const int l = static_cast<int>(j % kLanes);
    acc[l] = MaxOf(acc[l], x[j]);
  }
  const float raw_max = MaxTree(acc, kLanes);
  const float m = scaled ? raw_max / temperature : raw_max;

  for (float& a : acc) a = 0.0f;
  switch (level) {
    case SimdLevel::kAvx512:
      ExpSumBodyAvx512(x, num_blocks, temperature, scaled, m, acc);
      break;
    case SimdLevel::kAvx2:
      ExpSumBodyAvx2(x, num_blocks, temperature, scaled, m, acc);
      break;
    default:
      ExpSumBodyPortable(x, num_blocks, temperature, scaled, m, acc);
      break;
  }
  for (int64_t j = num_blocks * kLanes; j < vocab; ++j) {
    const int l = static_cast<int>(j % kLanes);
    acc[l] =
        acc[l] + DeterministicExp(ShiftedScalar(x[j], temperature, scaled, m));
  }
  return {m, std::log(SumTree(acc, kLanes))};
}

inline float OutputValue(float x, float temperature, bool scaled,
                         const RowStats& stats) {
  return ShiftedScalar(x, temperature, scaled, stats.max) - stats.log_sum;
}

// ---- output: out_j = (s_j - m) - log_sum, elementwise
// -------------------------------------------

void OutputRowPortable(const float* x, float* out, int64_t vocab,
                       float temperature, bool scaled, const RowStats& stats) {
  for (int64_t j = 0; j < vocab; ++j)
    out[j] = OutputValue(x[j], temperature, scaled, stats);
}

LOCKSTEP_TARGET_AVX2 void OutputRowAvx2(const float* x, float* out,
                                        int64_t vocab, float temperature,
                                        bool scaled, const RowStats& stats) {
  const __m256 vt = _mm256_set1_ps(temperature);
  const __m256 vm = _mm256_set1_ps(stats.max);
  const __m256 vl = _mm256_set1_ps(stats.log_sum);
  int64_t j = 0;
  for (; j + 8 <= vocab; j += 8) {
    __m256 s = _mm256_loadu_ps(x + j);
    if (scaled) s = _mm256_div_ps(s, vt);
    _mm256_storeu_ps(out + j, _mm256_sub_ps(_mm256_sub_ps(s, vm), vl));
  }
  for (; j < vocab; ++j) out[j] = OutputValue(x[j], temperature, scaled, stats);
}

LOCKSTEP_TARGET_AVX512 void OutputRowAvx512(const float* x, float* out,
                                            int64_t vocab, float temperature,
                                            bool scaled,
                                            const RowStats& stats) {
  const __m512 vt = _mm512_set1_ps(temperature);
  const __m512 vm = _mm512_set1_ps(stats.max);
  const __m512 vl = _mm512_set1_ps(stats.log_sum);
  int64_t j = 0;
  for (; j + 16 <= vocab; j += 16) {
    __m512 s = _mm512_loadu_ps(x + j);
    if (scaled) s = _mm512_div_ps(s, vt);
    _mm512_storeu_ps(out + j, _mm512_sub_ps(_mm512_sub_ps(s, vm), vl));
  }
  for (; j < vocab; ++j) out[j] = OutputValue(x[j], temperature, scaled, stats);
}

}  // namespace

void TargetLogProbsRows(const float* logits, const int64_t* targets, float* out,
                        int64_t vocab, float temperature, int64_t row_begin,
                        int64_t row_end) {
  const SimdLevel level = ActiveSimdLevel();
  const bool scaled = temperature != 1.0f;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t target = targets[r];
    if (target < 0 || target >= vocab) {
      out[r] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float* x = logits + r * vocab;
    const RowStats stats = ComputeRowStats(x, vocab, temperature, level);
    out[r] = OutputValue(x[target], temperature, scaled, stats);
  }
}

void LogSoftmaxRows(const float* logits, float* out, int64_t vocab,
                    float temperature, int64_t row_begin, int64_t row_end) {
  const SimdLevel level = ActiveSimdLevel();
  const bool scaled = temperature != 1.0f;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* x = logits + r * vocab;
    float* out_row = out + r * vocab;
    const RowStats stats = ComputeRowStats(x, vocab, temperature, level);
    switch (level) {
      case SimdLevel::kAvx512:
        OutputRowAvx512(x, out_row, vocab, temperature, scaled, stats);
        break;
      case SimdLevel::kAvx2:
        OutputRowAvx2(x, out_row, vocab, temperature, scaled, stats);
        break;
      default:
        OutputRowPortable(x, out_row, vocab, temperature, scaled, stats);
        break;
    }
  }
}

}  // namespace lockstep::kernels
