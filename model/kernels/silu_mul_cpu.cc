// Batch-invariant SwiGLU gate (see silu_mul_cpu.h).
//
// out_i = (g_i / (1 + exp(-g_i))) * up_i, in this order, with DeterministicExp
// / ExpAvx2 / ExpAvx512 (identical bits lane by lane), so vector bodies, scalar
// tails and every SIMD level agree and an element's bits depend only on (g_i,
// up_i).
#include "model/kernels/silu_mul_cpu.h"

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

inline float SiluMulScalar(float g, float up) {
  return (g / (1.0f + DeterministicExp(-g))) * up;
}

void SiluMulPortable(const float* gate, const float* up, float* out,
                     int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = SiluMulScalar(gate[i], up[i]);
}

LOCKSTEP_TARGET_AVX2 void SiluMulAvx2(const float* gate, const float* up,
                                      float* out, int64_t begin, int64_t end) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = ExpAvx2(_mm256_xor_ps(g, sign));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < end; ++i) out[i] = SiluMulScalar(gate[i], up[i]);
}

LOCKSTEP_TARGET_AVX512 void SiluMulAvx512(const float* gate, const float* up,
                                          float* out, int64_t begin,
                                          int64_t end) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 neg_g =
        _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), sign));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, ExpAvx512(neg_g)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  for (; i < end; ++i) out[i] = SiluMulScalar(gate[i], up[i]);
}

}  // namespace

void SiluMul(const float* gate, const float* up, float* out, int64_t begin,
             int64_t end) {
  switch (ActiveSimdLevel()) {
    case SimdLevel::kAvx512:
      SiluMulAvx512(gate, up, out, begin, end);
      break;
    case SimdLevel::kAvx2:
      SiluMulAvx2(gate, up, out, begin, end);
      break;
    default:
      SiluMulPortable(gate, up, out, begin, end);
      break;
  }
}

}  // namespace lockstep::kernels
