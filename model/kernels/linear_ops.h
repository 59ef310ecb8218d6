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
//
// Hot swap without a repack stall: Stage(next) packs the next weight tensor on the caller's
// thread while forwards keep using the current pack; once the parameter points at `next`
// (Tensor::set_data), Commit(parameter) makes the staged pack current in O(1) and hands back the
// previous one, so that the caller can free it off the hot thread.
class LinearPackCache {
 public:
  // Returns the packed form of `weight` ([N, K] fp32), packing it if it changed.
  PackedLinearWeight Get(const torch::Tensor& weight);

  // Packs `next` ([N, K] fp32) as the staged pack, replacing an earlier staged one. The packing
  // runs without holding the cache's lock (Get is not blocked meanwhile). The caller must not
  // change `next` in place afterwards.
  void Stage(const torch::Tensor& next);

  // If the staged pack was made from the storage `weight` now uses, it becomes current (without
  // packing) and the previous current pack is returned (empty otherwise); the staged slot is
  // cleared either way. O(1).
  PackedLinearWeight Commit(const torch::Tensor& weight);

  // True once some forward has packed a weight here (fast mode packs only for decode-sized
  // inputs, so a fast-mode trainer's caches stay empty and need no staging).
  bool in_use();

 private:
  std::mutex mu_;
  PackedLinearWeight packed_;
  const void* data_ = nullptr;
  int64_t version_ = -1;
  int64_t numel_ = -1;
  PackedLinearWeight staged_;
  const void* staged_data_ = nullptr;
  int64_t staged_numel_ = -1;
};

// y = x W^T (+ b) with every output element summed over K in one fixed order (batch-invariant).
// x: [..., K] fp32; weight: [N, K] fp32; bias: [N] or undefined. Differentiable: backward is
// the ordinary matmul math. `cache` may be null (packs on every call).
torch::Tensor BatchInvariantLinear(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, LinearPackCache* cache);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_
