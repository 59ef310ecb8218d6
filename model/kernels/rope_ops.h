// LibTorch glue for the table rotary embedding (kernel: rope_cpu.h). Not differentiable: the
// model calls it only where no gradient is wanted and runs the stock formula otherwise, which
// gives the same bits.
#ifndef LOCKSTEP_MODEL_KERNELS_ROPE_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_ROPE_OPS_H_

#include <torch/torch.h>

namespace lockstep::kernels {

// x: [num_tokens, num_heads, head_dim] float32; cos, sin: [max_positions, head_dim] float32;
// positions: [num_tokens] int64, each in [0, max_positions). Returns the rotated x. A CUDA x runs
// the CUDA kernel (ops_cuda.h), the tables on the host or on x's device.
torch::Tensor RotateHalfFromTable(const torch::Tensor& x, const torch::Tensor& cos,
                                  const torch::Tensor& sin, const torch::Tensor& positions);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ROPE_OPS_H_
