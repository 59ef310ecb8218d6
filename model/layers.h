// Parameter-holding building blocks. Each registers its tensors under the Hugging Face names
// (`weight`, `bias`) so that named_parameters() yields checkpoint names unchanged.
#ifndef LOCKSTEP_MODEL_LAYERS_H_
#define LOCKSTEP_MODEL_LAYERS_H_

#include <memory>

#include <torch/torch.h>

#include "model/kernels/numeric_mode.h"
#include "model/ops.h"

namespace lockstep {

class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias, torch::Dtype dtype,
             NumericMode mode);
  torch::Tensor forward(const torch::Tensor& x) {
    return ops::Linear(x, weight, bias, mode_, pack_cache_.get());
  }

  // Hot swap (Transformer::PrepackWeights / AdoptWeights): packs `next` (the weight about to be
  // installed) without blocking forwards, in batch-invariant mode and whenever a fast-mode
  // decode step has packed this weight; otherwise a no-op.
  void StagePackedWeight(const torch::Tensor& next);
  // After `weight` was pointed at the staged tensor: makes its pack current in O(1); returns the
  // previous pack (empty if there was none to replace) for the caller to free.
  kernels::PackedLinearWeight CommitPackedWeight();

  torch::Tensor weight;  // [out, in]
  torch::Tensor bias;    // [out] or undefined

 private:
  NumericMode mode_;
  std::unique_ptr<kernels::LinearPackCache> pack_cache_;  // batch-invariant mode's packed weight
};
TORCH_MODULE(Linear);

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps, torch::Dtype dtype, NumericMode mode);
  torch::Tensor forward(const torch::Tensor& x) { return ops::RmsNorm(x, weight, eps_, mode_); }

  torch::Tensor weight;  // [dim]

 private:
  double eps_;
  NumericMode mode_;
};
TORCH_MODULE(RmsNorm);

class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t dim, torch::Dtype dtype);
  torch::Tensor forward(const torch::Tensor& ids) { return weight.index_select(0, ids); }

  torch::Tensor weight;  // [num_embeddings, dim]
};
TORCH_MODULE(Embedding);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_LAYERS_H_
