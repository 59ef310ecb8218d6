// Batch-invariant SwiGLU gate (fp32): out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
// Every element goes through the same arithmetic (same exp routine for vector lanes and scalar
// tails), so an element's bits do not depend on where it sits in the array.
#ifndef LOCKSTEP_MODEL_KERNELS_SILU_MUL_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_SILU_MUL_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

void SiluMul(const float* gate, const float* up, float* out, int64_t begin, int64_t end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_SILU_MUL_CPU_H_
