// The SwiGLU MLP, down(silu(gate(x)) * up(x)): a dense layer's MLP, and each expert of a
// sparse (MoE) layer. Parameter names are Hugging Face's (gate_proj, up_proj, down_proj).
#ifndef LOCKSTEP_MODEL_MLP_H_
#define LOCKSTEP_MODEL_MLP_H_

#include <torch/torch.h>

#include "model/config.h"
#include "model/forward_kind.h"
#include "model/forward_observer.h"
#include "model/kernels/numeric_mode.h"
#include "model/layers.h"

namespace lockstep {

class MlpImpl : public torch::nn::Module {
 public:
  // hidden_size -> intermediate_size -> hidden_size, in the options' dtype and numeric mode.
  MlpImpl(int64_t hidden_size, int64_t intermediate_size, torch::Dtype dtype, NumericMode mode);
  // down(silu(gate(x)) * up(x)) in a forward of `kind`; `tap` sees gate, up, silu·mul and down.
  torch::Tensor forward(const torch::Tensor& x, ForwardKind kind, const OpTap& tap = {});

  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  NumericMode mode_;
};
TORCH_MODULE(Mlp);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_MLP_H_
