// The sparse mixture-of-experts MLP of a Qwen3-MoE layer (Hugging Face's Qwen3MoeSparseMoeBlock):
//   logits = gate(x)                         [tokens, num_experts], the model's linear
//   (w, e) = top-k of softmax(logits)        float32, lowest expert index first among equals,
//                                            w renormalised to sum 1 when norm_topk_prob
//   out_t  = w_t0 * expert_{e_t0}(x_t) + w_t1 * expert_{e_t1}(x_t) + ...   in rank order
// Each expert is a SwiGLU MLP of moe_intermediate_size (mlp.h).
//
// Batch invariance: the router is a row of the fixed-order linear plus the row-wise routing
// kernel (kernels/moe_routing_ops.h); each expert runs once over the tokens that chose it (the
// fixed-order linear's result for a row does not depend on the other rows); each product is
// one elementwise multiply, and a token's k products are added left to right in rank order. So a
// token's output depends on the token alone: not on the batch, nor on which tokens share its
// experts. Fast mode runs the same code with fast mode's linears.
#ifndef LOCKSTEP_MODEL_MOE_H_
#define LOCKSTEP_MODEL_MOE_H_

#include <torch/torch.h>

#include "model/config.h"
#include "model/forward_kind.h"
#include "model/forward_observer.h"
#include "model/kernels/numeric_mode.h"
#include "model/layers.h"

namespace lockstep {

class MoeBlockImpl : public torch::nn::Module {
 public:
  // `config` must be a Qwen3-MoE config with num_experts > 0.
  MoeBlockImpl(const ModelConfig& config, torch::Dtype dtype, NumericMode mode);

  // x: [tokens, hidden_size] -> [tokens, hidden_size], in a forward of `kind`. `tap` sees the
  // router logits (Op::kRouterLogits) and the output (Op::kMoe), and receives the routing
  // decision (ForwardObserver::OnRouting) when an observer is set.
  torch::Tensor forward(const torch::Tensor& x, ForwardKind kind, const OpTap& tap = {});

  Linear gate{nullptr};                    // mlp.gate: [num_experts, hidden_size]
  torch::nn::ModuleList experts{nullptr};  // mlp.experts.{e}: Mlp

  int64_t num_experts() const { return num_experts_; }
  int64_t top_k() const { return top_k_; }

 private:
  int64_t num_experts_;
  int64_t top_k_;
  bool normalize_;
};
TORCH_MODULE(MoeBlock);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_MOE_H_
