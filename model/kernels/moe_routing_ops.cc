#include "model/kernels/moe_routing_ops.h"

#include "model/kernels/moe_routing_cpu.h"
#include "model/kernels/recompute_backward.h"
#include "model/kernels/wants_grad.h"

namespace lockstep::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Runs the kernel on the calling thread: rows x num_experts is small next to the experts'
// matmuls (a 4096-token prefill over 128 experts is 0.5M exps).
TopKRouting RunTopKRouting(const torch::Tensor& logits, int64_t k, bool normalize) {
  TORCH_CHECK(logits.dim() == 2, "top-k routing: logits must be [rows, num_experts], got ",
              logits.sizes());
  TORCH_CHECK(k >= 1 && k <= logits.size(1), "top-k routing: k = ", k, " with ", logits.size(1),
              " experts");
  TORCH_CHECK(logits.is_cpu(), "top-k routing has no CUDA kernel yet (model/kernels/README.md): ",
              "logits on ", logits.device(), " cannot be routed; a mixture-of-experts model "
              "runs on the CPU only");
  const torch::Tensor l = logits.detach().to(torch::kFloat32).contiguous();
  TopKRouting routing{torch::empty({l.size(0), k}, l.options()),
                      torch::empty({l.size(0), k}, l.options().dtype(torch::kInt64))};
  TopKRoutingRows(l.data_ptr<float>(), l.size(1), k, normalize, routing.weights.data_ptr<float>(),
                  routing.experts.data_ptr<int64_t>(), 0, l.size(0));
  return routing;
}

struct TopKRoutingFunction : public torch::autograd::Function<TopKRoutingFunction> {
  static tensor_list forward(AutogradContext* ctx, torch::Tensor logits, int64_t k,
                             bool normalize) {
    TopKRouting routing = RunTopKRouting(logits, k, normalize);
    ctx->save_for_backward({logits, routing.experts});
    ctx->saved_data["normalize"] = normalize;
    ctx->mark_non_differentiable({routing.experts});
    return {routing.weights, routing.experts};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const bool normalize = ctx->saved_data["normalize"].toBool();
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor experts = saved[1];
    auto g = RecomputeBackward(
        [&](const auto& in) { return TopKRoutingWeightsFormula(in[0], experts, normalize); },
        {saved[0]}, grads[0]);
    return {g[0], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor TopKRoutingWeightsFormula(const torch::Tensor& logits, const torch::Tensor& experts,
                                        bool normalize) {
  torch::Tensor weights = torch::softmax(logits.to(torch::kFloat32), -1).gather(1, experts);
  return normalize ? weights / weights.sum(-1, /*keepdim=*/true) : weights;
}

TopKRouting FixedOrderTopKRouting(const torch::Tensor& logits, int64_t k, bool normalize) {
  if (!WantsGrad(logits)) return RunTopKRouting(logits, k, normalize);
  tensor_list out = TopKRoutingFunction::apply(logits, k, normalize);
  return {out[0], out[1]};
}

}  // namespace lockstep::kernels
