// LibTorch glue for the batch-invariant linear (kernel: linear_cpu.h).
#ifndef LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_

#include <mutex>

#include <torch/torch.h>

#include "model/kernels/linear_cpu.h"

namespace lockstep::kernels {

// The packed copy of one weight tensor, re-packed when the weight changes (a new tensor, new
// storage, or an in-place update that bumps the tensor's version counter). One cache per weight
// use site (each Linear layer, the LM head). Thread-safe.
class LinearPackCache {
 public:
  // Returns the packed form of `weight` ([N, K] fp32), packing it if it changed.
  PackedLinearWeight Get(const torch::Tensor& weight);

 private:
  std::mutex mu_;
  PackedLinearWeight packed_;
  const void* data_ = nullptr;
  int64_t version_ = -1;
  int64_t numel_ = -1;
};

// y = x W^T (+ b) with every output element summed over K in one fixed order (batch-invariant).
// x: [..., K] fp32; weight: [N, K] fp32; bias: [N] or undefined. Differentiable: backward is
// the ordinary matmul math. `cache` may be null (packs on every call).
torch::Tensor BatchInvariantLinear(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, LinearPackCache* cache);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_
