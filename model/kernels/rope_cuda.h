// Rotary embedding on the GPU from a cos/sin table, Hugging Face rotate_half convention (fp32),
// the formula of rope_cpu.h:
//   out[t, h, i] = x[t, h, i] * cos[p_t, i] - x[t, h, i + half] * sin[p_t, i]   (i < half)
//   out[t, h, i] = x[t, h, i] * cos[p_t, i] + x[t, h, i - half] * sin[p_t, i]   (i >= half)
// two rounded products and one rounded sum per element, never fused (the same bits as
// rope_cpu.h and LibTorch's `x * cos + cat(-x2, x1) * sin`). Raw device pointers, asynchronous.
#ifndef LOCKSTEP_MODEL_KERNELS_ROPE_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_ROPE_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

struct RopeCudaProblem {
  const float* x = nullptr;            // [num_tokens, num_heads, head_dim], contiguous
  const float* cos = nullptr;          // [max_positions, head_dim], contiguous
  const float* sin = nullptr;          // same
  const int64_t* positions = nullptr;  // [num_tokens] device, each in [0, max_positions)
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;       // even
  int64_t max_positions = 0;  // rows of the tables; a position outside writes NaN
  float* out = nullptr;       // like x; may not alias it
};

KernelStatus RopeCuda(const RopeCudaProblem& problem, cudaStream_t stream);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_ROPE_CUDA_H_
