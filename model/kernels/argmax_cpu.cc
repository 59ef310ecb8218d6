// One pass over a row: each vector lane keeps the largest value it has seen and the index of its
// first occurrence (a strict > replaces it, so NaN and later ties never do); the lanes then
// combine by value, ties to the lower index. Exact: every SIMD level gives the same index.
#include "model/kernels/argmax_cpu.h"

#include <limits>

#include "model/kernels/deterministic_math_cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lockstep::kernels {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// The lanes' (value, first index) pairs combined; 0 when no value is above -inf.
int64_t CombineLanes(const float* values, const int32_t* indices, int lanes) {
  float best = kMinusInf;
  int64_t index = 0;
  for (int l = 0; l < lanes; ++l) {
    if (values[l] > best || (values[l] == best && best > kMinusInf && indices[l] < index)) {
      best = values[l];
      index = indices[l];
    }
  }
  return index;
}

int64_t ArgMaxPortable(const float* x, int64_t n) {
  float best = kMinusInf;
  int64_t index = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > best) {
      best = x[i];
      index = i;
    }
  }
  return index;
}

#if defined(__x86_64__)
// One step of a lane-wise scan: lanes whose value v beats their best so far take v and its index.
LOCKSTEP_TARGET_AVX2 inline void UpdateAvx2(__m256 v, __m256i index, __m256* best,
                                            __m256i* best_index) {
  const __m256 greater = _mm256_cmp_ps(v, *best, _CMP_GT_OQ);
  *best = _mm256_blendv_ps(*best, v, greater);
  *best_index = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*best_index),
                                                     _mm256_castsi256_ps(index), greater));
}

LOCKSTEP_TARGET_AVX2 int64_t ArgMaxAvx2(const float* x, int64_t n) {
  __m256 best = _mm256_set1_ps(kMinusInf);
  __m256i best_index = _mm256_setzero_si256();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i at = _mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(i)));
    UpdateAvx2(_mm256_loadu_ps(x + i), at, &best, &best_index);
  }
  if (i < n) {  // the tail: lanes past n read -inf, which never wins
    const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    const __m256 v = _mm256_blendv_ps(_mm256_set1_ps(kMinusInf), _mm256_maskload_ps(x + i, valid),
                                      _mm256_castsi256_ps(valid));
    const __m256i at = _mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(i)));
    UpdateAvx2(v, at, &best, &best_index);
  }
  alignas(32) float values[8];
  alignas(32) int32_t indices[8];
  _mm256_store_ps(values, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(indices), best_index);
  return CombineLanes(values, indices, 8);
}

LOCKSTEP_TARGET_AVX512 inline void UpdateAvx512(__m512 v, __m512i index, __m512* best,
                                                __m512i* best_index) {
  const __mmask16 greater = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ);
  *best = _mm512_mask_mov_ps(*best, greater, v);
  *best_index = _mm512_mask_mov_epi32(*best_index, greater, index);
}

LOCKSTEP_TARGET_AVX512 int64_t ArgMaxAvx512(const float* x, int64_t n) {
  __m512 best = _mm512_set1_ps(kMinusInf);
  __m512i best_index = _mm512_setzero_si512();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i at = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
    UpdateAvx512(_mm512_loadu_ps(x + i), at, &best, &best_index);
  }
  if (i < n) {  // the tail: lanes past n read -inf, which never wins
    const __mmask16 valid = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512i at = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
    UpdateAvx512(_mm512_mask_loadu_ps(_mm512_set1_ps(kMinusInf), valid, x + i), at, &best,
                 &best_index);
  }
  alignas(64) float values[16];
  alignas(64) int32_t indices[16];
  _mm512_store_ps(values, best);
  _mm512_store_si512(indices, best_index);
  return CombineLanes(values, indices, 16);
}
#endif

}  // namespace

void ArgMaxRows(const float* x, int64_t cols, int64_t* out, int64_t row_begin, int64_t row_end) {
  const SimdLevel level = ActiveSimdLevel();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* row = x + r * cols;
#if defined(__x86_64__)
    if (level == SimdLevel::kAvx512) {
      out[r] = ArgMaxAvx512(row, cols);
      continue;
    }
    if (level == SimdLevel::kAvx2) {
      out[r] = ArgMaxAvx2(row, cols);
      continue;
    }
#endif
    out[r] = ArgMaxPortable(row, cols);
  }
}

}  // namespace lockstep::kernels
