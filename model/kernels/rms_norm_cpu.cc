// Batch-invariant RMSNorm (see rms_norm_cpu.h).
//
// Per row, in this order (all fp32, matching Hugging Face's LlamaRMSNorm /
// Qwen3RMSNorm):
//   sum  = sum_i x_i^2      canonical 64-lane order: acc[i % 64] = fma(x_i,
//   x_i, acc[i % 64])
//                           in increasing i, then the pairwise tree 32, 16,
//                           ..., 1
//   inv  = 1 / sqrt(sum / dim + float(eps))
//   y_i  = (x_i * inv) * w_i
// The order depends only on dim; the AVX2 / AVX-512 bodies hold the 64
// accumulators in 8 / 4 registers and hand the same array to the same scalar
// tail and tree, or, for a row of whole blocks, run the tree's adds in those
// registers, so every level gives the same bits.
#include "model/kernels/rms_norm_cpu.h"

#include <cmath>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

constexpr int kLanes = kReduceLanes;

// Accumulates elements [0, n - n % 64) of the canonical order into acc.
void SumSquaresBodyPortable(const float* x, int64_t num_blocks, float* acc) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* block = x + b * kLanes;
    for (int l = 0; l < kLanes; ++l)
      acc[l] = std::fma(block[l], block[l], acc[l]);
  }
}

LOCKSTEP_TARGET_AVX2 void SumSquaresBodyAvx2(const float* x, int64_t num_blocks,
                                             float* acc) {
  __m256 a[8];
  for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(acc + 8 * k);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* block = x + b * kLanes;
    for (int k = 0; k < 8; ++k) {
      const __m256 v = _mm256_loadu_ps(block + 8 * k);
      a[k] = _mm256_fmadd_ps(v, v, a[k]);
    }
  }
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(acc + 8 * k, a[k]);
}

LOCKSTEP_TARGET_AVX512 void SumSquaresBodyAvx512(const float* x,
                                                 int64_t num_blocks,
                                                 float* acc) {
  __m512 a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm512_loadu_ps(acc + 16 * k);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* block = x + b * kLanes;
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(block + 16 * k);
      a[k] = _mm512_fmadd_ps(v, v, a[k]);
    }
  }
  for (int k = 0; k < 4; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
}

// The sum of squares of a row of whole 64-float blocks, kept in registers: the
// bodies' FMAs, then SumTree's adds (lanes l and l + s, s = 32, 16, ..., 1),
// lane for lane, without the round trip through a 64-float array and 63 scalar
// adds, which cost a 64-float row (a head of q_norm / k_norm) more than its
// arithmetic: bench_kernels' row ops at 1 thread, AMD EPYC Zen 5, 256 x 12 x 64
// took 62-134 us in the kernel against 63 in the formula, 20.5 with this
// (2026-12-07).
LOCKSTEP_TARGET_AVX2 float SumSquaresWholeBlocksAvx2(const float* x,
                                                     int64_t num_blocks) {
  __m256 a[8];
  for (int k = 0; k < 8; ++k) a[k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* block = x + b * kLanes;
    for (int k = 0; k < 8; ++k) {
      const __m256 v = _mm256_loadu_ps(block + 8 * k);
      a[k] = _mm256_fmadd_ps(v, v, a[k]);
    }
  }
  // s = 32: a[k] holds lanes 8k .. 8k + 7.
  __m256 s32[4];
  for (int k = 0; k < 4; ++k) s32[k] = _mm256_add_ps(a[k], a[k + 4]);
  const __m256 s16_lo = _mm256_add_ps(s32[0], s32[2]);
  const __m256 s16_hi = _mm256_add_ps(s32[1], s32[3]);
  const __m256 s8 = _mm256_add_ps(s16_lo, s16_hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8),
                               _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

LOCKSTEP_TARGET_AVX512 float SumSquaresWholeBlocksAvx512(const float* x,
                                                         int64_t num_blocks) {
  __m512 a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm512_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* block = x + b * kLanes;
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(block + 16 * k);
      a[k] = _mm512_fmadd_ps(v, v, a[k]);
    }
  }
  // s = 32: a[k] holds lanes 16k .. 16k + 15.
  const __m512 s32_lo = _mm512_add_ps(a[0], a[2]);
  const __m512 s32_hi = _mm512_add_ps(a[1], a[3]);
  const __m512 s16 = _mm512_add_ps(s32_lo, s32_hi);
  const __m256 s8 = _mm256_add_ps(
      _mm512_castps512_ps256(s16),
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s16), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8),
                               _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// The canonical sum of squares of one row (see the top of this file).
float SumSquares(const float* x, int64_t dim, SimdLevel level) {
  const int64_t num_blocks = dim / kLanes;
  if (dim % kLanes == 0 && level == SimdLevel::kAvx512) {
    return SumSquaresWholeBlocksAvx512(x, num_blocks);
  }
  if (dim % kLanes == 0 && level == SimdLevel::kAvx2) {
    return SumSquaresWholeBlocksAvx2(x, num_blocks);
  }
  float acc[kLanes] = {};
  switch (level) {
    case SimdLevel::kAvx512:
      SumSquaresBodyAvx512(x, num_blocks, acc);
      break;
    case SimdLevel::kAvx2:
      SumSquaresBodyAvx2(x, num_blocks, acc);
      break;
    default:
      SumSquaresBodyPortable(x, num_blocks, acc);
      break;
  }
  for (int64_t i = num_blocks * kLanes; i < dim; ++i) {
    const int l = static_cast<int>(i % kLanes);
    acc[l] = std::fma(x[i], x[i], acc[l]);
  }
  return SumTree(acc, kLanes);
}

// y_i = (x_i * inv) * w_i: elementwise, so any vector width gives the same
// bits.
void ScalePortable(const float* x, const float* w, float inv, float* y,
                   int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * inv) * w[i];
}

LOCKSTEP_TARGET_AVX2 void ScaleAvx2(const float* x, const float* w, float inv,
                                    float* y, int64_t n) {
  const __m256 vinv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = (x[i] * inv) * w[i];
}

LOCKSTEP_TARGET_AVX512 void ScaleAvx512(const float* x, const float* w,
                                        float inv, float* y, int64_t n) {
  const __m512 vinv = _mm512_set1_ps(inv);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vinv);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(v, _mm512_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = (x[i] * inv) * w[i];
}

}  // namespace

void RmsNormRows(const float* x, const float* weight, float* y, int64_t dim,
                 double eps, int64_t row_begin, int64_t row_end) {
  const SimdLevel level = ActiveSimdLevel();
  const float eps_f = static_cast<float>(eps);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float sum = SumSquares(xr, dim, level);
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps_f);
    switch (level) {
      case SimdLevel::kAvx512:
        ScaleAvx512(xr, weight, inv, yr, dim);
        break;
      case SimdLevel::kAvx2:
        ScaleAvx2(xr, weight, inv, yr, dim);
        break;
      default:
        ScalePortable(xr, weight, inv, yr, dim);
        break;
    }
  }
}

}  // namespace lockstep::kernels
