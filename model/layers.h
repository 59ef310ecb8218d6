// Parameter-holding building blocks. Each registers its tensors under the Hugging Face names
// (`weight`, `bias`) so that named_parameters() yields checkpoint names unchanged.
#ifndef LOCKSTEP_MODEL_LAYERS_H_
#define LOCKSTEP_MODEL_LAYERS_H_

#include <initializer_list>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "model/forward_kind.h"
#include "model/kernels/numeric_mode.h"
#include "model/ops.h"

namespace lockstep {

class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias, torch::Dtype dtype,
             NumericMode mode);
  // `kind`: the forward this call belongs to (ops::Linear's dispatch in fast mode).
  torch::Tensor forward(const torch::Tensor& x, ForwardKind kind) {
    return ops::Linear(x, weight, bias, mode_, kind);
  }
  void ResetParameters();  // zeros
  NumericMode mode() const { return mode_; }

  torch::Tensor weight;  // [out, in]
  torch::Tensor bias;    // [out] or undefined

 private:
  NumericMode mode_;
};
TORCH_MODULE(Linear);

// The same x through several linears of one mode (q, k and v; gate and up): output i is
// linears[i]->forward(x, kind), bit for bit, and where the kernel runs them all they are one
// kernel call (ops::Linears): at decode, one parallel region instead of one per projection.
std::vector<torch::Tensor> ForwardLinears(const torch::Tensor& x,
                                          std::initializer_list<const LinearImpl*> linears,
                                          ForwardKind kind);

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps, torch::Dtype dtype, NumericMode mode);
  torch::Tensor forward(const torch::Tensor& x) { return ops::RmsNorm(x, weight, eps_, mode_); }
  void ResetParameters();  // ones

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
  void ResetParameters();  // zeros

  torch::Tensor weight;  // [num_embeddings, dim]
};
TORCH_MODULE(Embedding);

// Writes the starting values of every layer below `root` (itself included): zeros for linears
// and embeddings, ones for norms. The layers' constructors leave their parameters unwritten.
void ResetParameters(torch::nn::Module& root);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_LAYERS_H_
