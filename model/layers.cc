#include "model/layers.h"

namespace lockstep {

// Parameters are allocated untouched (torch::empty): the Transformer first gives them their final
// home (huge_pages.h), then ResetParameters() writes their starting values, so that no page of
// the weights is made resident twice. Initialisation and loading fill them in afterwards.
LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias, torch::Dtype dtype,
                       NumericMode mode)
    : mode_(mode) {
  weight = register_parameter("weight", torch::empty({out_features, in_features}, dtype));
  if (bias) this->bias = register_parameter("bias", torch::empty({out_features}, dtype));
}

void LinearImpl::ResetParameters() {
  torch::NoGradGuard no_grad;
  weight.zero_();
  if (bias.defined()) bias.zero_();
}

std::vector<torch::Tensor> ForwardLinears(const torch::Tensor& x,
                                          std::initializer_list<const LinearImpl*> linears,
                                          ForwardKind kind) {
  TORCH_CHECK(linears.size() > 0, "ForwardLinears needs at least one linear");
  const NumericMode mode = (*linears.begin())->mode();
  std::vector<torch::Tensor> weights, biases;
  for (const LinearImpl* linear : linears) {
    TORCH_CHECK(linear->mode() == mode, "ForwardLinears: the linears' numeric modes differ");
    weights.push_back(linear->weight);
    biases.push_back(linear->bias);
  }
  return ops::Linears(x, weights, biases, mode, kind);
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, torch::Dtype dtype, NumericMode mode)
    : eps_(eps), mode_(mode) {
  weight = register_parameter("weight", torch::empty({dim}, dtype));
}

void RmsNormImpl::ResetParameters() {
  torch::NoGradGuard no_grad;
  weight.fill_(1.0);
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim, torch::Dtype dtype) {
  weight = register_parameter("weight", torch::empty({num_embeddings, dim}, dtype));
}

void EmbeddingImpl::ResetParameters() {
  torch::NoGradGuard no_grad;
  weight.zero_();
}

namespace {

void ResetLayer(torch::nn::Module& module) {
  if (auto* linear = module.as<LinearImpl>()) linear->ResetParameters();
  if (auto* norm = module.as<RmsNormImpl>()) norm->ResetParameters();
  if (auto* embedding = module.as<EmbeddingImpl>()) embedding->ResetParameters();
}

}  // namespace

void ResetParameters(torch::nn::Module& root) {
  // Not modules(/*include_self=*/true): that needs `root` owned by a shared_ptr already, and the
  // Transformer calls this from its constructor.
  ResetLayer(root);
  for (const std::shared_ptr<torch::nn::Module>& module : root.modules(/*include_self=*/false)) {
    ResetLayer(*module);
  }
}

}  // namespace lockstep
