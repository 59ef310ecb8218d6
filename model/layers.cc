#include "model/layers.h"

namespace lockstep {

// Parameters start empty-valued (zeros/ones); initialisation and loading fill them in.
LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias, torch::Dtype dtype,
                       NumericMode mode)
    : mode_(mode) {
  weight = register_parameter("weight", torch::zeros({out_features, in_features}, dtype));
  if (bias) this->bias = register_parameter("bias", torch::zeros({out_features}, dtype));
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, torch::Dtype dtype, NumericMode mode)
    : eps_(eps), mode_(mode) {
  weight = register_parameter("weight", torch::ones({dim}, dtype));
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim, torch::Dtype dtype) {
  weight = register_parameter("weight", torch::zeros({num_embeddings, dim}, dtype));
}

}  // namespace lockstep
