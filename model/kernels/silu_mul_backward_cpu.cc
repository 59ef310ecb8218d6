// The SwiGLU gate's gradients (see silu_mul_backward_cpu.h). Per element, in
// this order: s = 1 / (1 + exp(-g)); a = dy * s; grad_up = a * g;
// grad_gate = (a * u) * (1 + g * (1 - s)).
#include "model/kernels/silu_mul_backward_cpu.h"

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

inline void BackwardScalar(float g, float u, float dy, float* grad_gate,
                           float* grad_up) {
  const float s = 1.0f / (1.0f + DeterministicExp(-g));
  const float a = dy * s;
  *grad_up = a * g;
  *grad_gate = (a * u) * (1.0f + g * (1.0f - s));
}

void BackwardPortable(const float* gate, const float* up, const float* grad_out,
                      float* grad_gate, float* grad_up, int64_t begin,
                      int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    BackwardScalar(gate[i], up[i], grad_out[i], grad_gate + i, grad_up + i);
  }
}

LOCKSTEP_TARGET_AVX2 void BackwardAvx2(const float* gate, const float* up,
                                       const float* grad_out, float* grad_gate,
                                       float* grad_up, int64_t begin,
                                       int64_t end) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 s = _mm256_div_ps(
        one, _mm256_add_ps(one, ExpAvx2(_mm256_xor_ps(g, sign))));
    const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(grad_out + i), s);
    _mm256_storeu_ps(grad_up + i, _mm256_mul_ps(a, g));
    const __m256 slope = _mm256_add_ps(
        one, _mm256_mul_ps(g, _mm256_sub_ps(one, s)));
    _mm256_storeu_ps(grad_gate + i,
                     _mm256_mul_ps(_mm256_mul_ps(a, _mm256_loadu_ps(up + i)),
                                   slope));
  }
  for (; i < end; ++i) {
    BackwardScalar(gate[i], up[i], grad_out[i], grad_gate + i, grad_up + i);
  }
}

LOCKSTEP_TARGET_AVX512 void BackwardAvx512(const float* gate, const float* up,
                                           const float* grad_out,
                                           float* grad_gate, float* grad_up,
                                           int64_t begin, int64_t end) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 neg_g =
        _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), sign));
    const __m512 s =
        _mm512_div_ps(one, _mm512_add_ps(one, ExpAvx512(neg_g)));
    const __m512 a = _mm512_mul_ps(_mm512_loadu_ps(grad_out + i), s);
    _mm512_storeu_ps(grad_up + i, _mm512_mul_ps(a, g));
    const __m512 slope = _mm512_add_ps(
        one, _mm512_mul_ps(g, _mm512_sub_ps(one, s)));
    _mm512_storeu_ps(grad_gate + i,
                     _mm512_mul_ps(_mm512_mul_ps(a, _mm512_loadu_ps(up + i)),
                                   slope));
  }
  for (; i < end; ++i) {
    BackwardScalar(gate[i], up[i], grad_out[i], grad_gate + i, grad_up + i);
  }
}

}  // namespace

void SiluMulBackward(const float* gate, const float* up, const float* grad_out,
                     float* grad_gate, float* grad_up, int64_t begin,
                     int64_t end) {
  switch (ActiveSimdLevel()) {
    case SimdLevel::kAvx512:
      BackwardAvx512(gate, up, grad_out, grad_gate, grad_up, begin, end);
      break;
    case SimdLevel::kAvx2:
      BackwardAvx2(gate, up, grad_out, grad_gate, grad_up, begin, end);
      break;
    default:
      BackwardPortable(gate, up, grad_out, grad_gate, grad_up, begin, end);
      break;
  }
}

}  // namespace lockstep::kernels
