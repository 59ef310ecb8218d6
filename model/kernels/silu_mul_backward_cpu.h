// The gradients of the SwiGLU gate (silu_mul_cpu.h), out = silu(gate) * up, for
// fp32 elements, with s = 1 / (1 + exp(-gate)):
//   grad_gate = grad_out * up * s * (1 + gate * (1 - s))
//   grad_up   = grad_out * gate * s
// One pass over the four arrays instead of differentiating the formula with
// autograd (a recomputed forward and four tensor passes more). The exp is the
// kernels' own (deterministic_math_cpu.h), so every SIMD level gives the same
// bits, though gradients need not be batch-invariant (DESIGN.md).
// Raw pointers, no LibTorch include; elements [begin, end).
#ifndef LOCKSTEP_MODEL_KERNELS_SILU_MUL_BACKWARD_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_SILU_MUL_BACKWARD_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

void SiluMulBackward(const float* gate, const float* up, const float* grad_out,
                     float* grad_gate, float* grad_up, int64_t begin,
                     int64_t end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_SILU_MUL_BACKWARD_CPU_H_
