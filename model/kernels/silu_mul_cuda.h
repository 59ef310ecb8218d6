// SwiGLU gate on the GPU (fp32): out[i] = (gate[i] / (1 + exp(-gate[i]))) * up[i], each element
// by one thread with the same IEEE-rounded operations (expf, division, product), so its bits do
// not depend on where it sits or on the launch. Raw device pointers, asynchronous on `stream`.
#ifndef LOCKSTEP_MODEL_KERNELS_SILU_MUL_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_SILU_MUL_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

// gate, up, out: [count] (out may alias gate or up).
KernelStatus SiluMulCuda(const float* gate, const float* up, float* out, int64_t count,
                         cudaStream_t stream);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_SILU_MUL_CUDA_H_
