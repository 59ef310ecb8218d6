// Shared arithmetic for the batch-invariant CPU kernels: one exp routine with a
// scalar, an AVX2 and an AVX-512 implementation that give identical bits, the
// canonical lane-tree reductions, and the runtime SIMD dispatch level.
//
// Why our own exp: a kernel's vector body and its scalar tail must round every
// element the same way, and all SIMD levels must agree, so that an element's
// bits never depend on where it sits in the array or on the machine's vector
// width. Every step below is an IEEE basic operation (add, mul, fma,
// compare/select, exact integer bit manipulation), so the three versions agree
// bit for bit. Accuracy: within 2 ulp of exp over the whole float range,
// including subnormal results.
//
// Every multiply that feeds an add is an explicit fma, so the bits do not
// depend on whether the including file is compiled with -ffp-contract=off (the
// kernels library is; tests may not be). Included only by the *_cpu.cc kernel
// files, their tests, and the benchmarks' --simd switch (bench/simd_flag.h);
// no LibTorch. Not thread-hostile: all functions are pure except
// SetSimdLevelForTesting (which the linear's family follows too).
#ifndef LOCKSTEP_MODEL_KERNELS_DETERMINISTIC_MATH_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_DETERMINISTIC_MATH_CPU_H_

// GCC 12 false positive (PR 105593): _mm512_undefined_* inside the AVX-512
// intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cmath>
#include <cstdint>
#include <cstring>

#define LOCKSTEP_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define LOCKSTEP_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace lockstep::kernels {

enum class SimdLevel : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

// The best level this CPU supports (AVX2 needs FMA as well).
SimdLevel SupportedSimdLevel();
// The level the kernels use: SupportedSimdLevel() unless lowered by
// SetSimdLevelForTesting.
SimdLevel ActiveSimdLevel();
// Tests force a lower level to check that every level gives identical bits. The
// level is clamped to SupportedSimdLevel(). Do not call while kernels run on
// other threads.
void SetSimdLevelForTesting(SimdLevel level);

namespace exp_detail {
// exp(x) = 2^n * exp(r), n = round(x / ln2) (as fma(x, log2e, M) - M, one
// rounding), r = x - n*ln2 (Cody-Waite with fma), exp(r) ~ 1 + r + r^2 * P(r)
// (Cephes expf polynomial), 2^n applied as 2^(n>>1) * 2^(n-(n>>1)) so that n in
// [-152, 128] needs no special case (overflow to inf and gradual underflow
// happen in the last, single-rounding multiply).
inline constexpr float kLowClamp = -105.0f;  // exp(-105) < 2^-151: rounds to 0
inline constexpr float kHighClamp =
    88.8f;  // exp(88.8) > FLT_MAX: rounds to inf
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic =
    12582912.0f;  // 1.5 * 2^23: (t + M) - M rounds t to int
inline constexpr float kLn2Hi = 0.693147182464599609375f;  // float(ln 2)
inline constexpr float kLn2Lo = -1.904654323148236e-09f;   // ln 2 - kLn2Hi
inline constexpr float kP0 = 1.9875691500e-4f;
inline constexpr float kP1 = 1.3981999507e-3f;
inline constexpr float kP2 = 8.3334519073e-3f;
inline constexpr float kP3 = 4.1665795894e-2f;
inline constexpr float kP4 = 1.6666665459e-1f;
inline constexpr float kP5 = 5.0000001201e-1f;
}  // namespace exp_detail

// Scalar exp, bit-identical to ExpAvx2 / ExpAvx512 lane by lane. NaN in, NaN
// out.
inline float DeterministicExp(float x) {
  using namespace exp_detail;
  float xc = x > kLowClamp
                 ? x
                 : kLowClamp;  // same select semantics as _mm*_max_ps(x, lo)
  xc = xc < kHighClamp ? xc : kHighClamp;  // same as _mm*_min_ps(xc, hi)
  const float n = std::fma(xc, kLog2e, kRoundMagic) - kRoundMagic;
  float r = std::fma(n, -kLn2Hi, xc);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  const float r2 = r * r;
  float y = std::fma(p, r2, r);
  y = y + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  const uint32_t bits1 = static_cast<uint32_t>(n1 + 127) << 23;
  const uint32_t bits2 = static_cast<uint32_t>(n2 + 127) << 23;
  float scale1, scale2;
  std::memcpy(&scale1, &bits1, sizeof(float));
  std::memcpy(&scale2, &bits2, sizeof(float));
  y = (y * scale1) * scale2;
  return x != x ? x : y;
}

LOCKSTEP_TARGET_AVX2 inline __m256 ExpAvx2(__m256 x) {
  using namespace exp_detail;
  __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(kLowClamp));
  xc = _mm256_min_ps(xc, _mm256_set1_ps(kHighClamp));
  const __m256 magic = _mm256_set1_ps(kRoundMagic);
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), magic), magic);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(p, r2, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvttps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 scale1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 scale2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  y = _mm256_mul_ps(_mm256_mul_ps(y, scale1), scale2);
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_blendv_ps(y, x, is_nan);
}

LOCKSTEP_TARGET_AVX512 inline __m512 ExpAvx512(__m512 x) {
  using namespace exp_detail;
  __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(kLowClamp));
  xc = _mm512_min_ps(xc, _mm512_set1_ps(kHighClamp));
  const __m512 magic = _mm512_set1_ps(kRoundMagic);
  const __m512 n =
      _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(kLog2e), magic), magic);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 r2 = _mm512_mul_ps(r, r);
  __m512 y = _mm512_fmadd_ps(p, r2, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvttps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 scale1 =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 scale2 =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  y = _mm512_mul_ps(_mm512_mul_ps(y, scale1), scale2);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(is_nan, y, x);
}

// Canonical reductions. A row of length n is reduced as: acc[i % kLanes] (op)=
// x[i] for i in increasing order (vector bodies hold kLanes consecutive
// accumulators; tails continue in the same array), then a pairwise tree: for s
// = kLanes/2 .. 1: acc[l] = acc[l] (op) acc[l + s]. The order depends only on
// n. Max uses a > b ? a : b, the select semantics of _mm*_max_ps.
inline constexpr int kReduceLanes = 64;

inline float SumTree(float* acc, int lanes) {
  for (int s = lanes / 2; s >= 1; s /= 2) {
    for (int l = 0; l < s; ++l) acc[l] = acc[l] + acc[l + s];
  }
  return acc[0];
}

inline float MaxOf(float a, float b) { return a > b ? a : b; }

inline float MaxTree(float* acc, int lanes) {
  for (int s = lanes / 2; s >= 1; s /= 2) {
    for (int l = 0; l < s; ++l) acc[l] = MaxOf(acc[l], acc[l + s]);
  }
  return acc[0];
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_DETERMINISTIC_MATH_CPU_H_
