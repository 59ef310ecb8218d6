#include "model/routing_recorder.h"

namespace lockstep {

void RoutingRecorder::OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                               const std::vector<int64_t>* /*token_rows*/) {
  if (op != Op::kRouterLogits) return;
  Layer entry;
  entry.layer = layer;
  entry.router_logits = output;
  layers_.push_back(std::move(entry));
}

void RoutingRecorder::OnRouting(int64_t layer, const RoutingDecision& routing) {
  // The block reports its logits first (MoeBlockImpl::forward), then its decision.
  if (layers_.empty() || layers_.back().layer != layer ||
      layers_.back().routing.experts.defined()) {
    layers_.push_back(Layer{layer, torch::Tensor(), {}});
  }
  layers_.back().routing = routing;
}

std::vector<torch::Tensor> RoutingRecorder::RouterLogits() const {
  std::vector<torch::Tensor> logits;
  for (const Layer& layer : layers_) {
    if (layer.router_logits.defined()) logits.push_back(layer.router_logits);
  }
  return logits;
}

torch::Tensor LoadBalancingLoss(const std::vector<torch::Tensor>& router_logits,
                                int64_t num_experts, int64_t top_k) {
  if (router_logits.empty()) return torch::zeros({}, torch::kFloat32);
  const torch::Tensor probs = torch::softmax(torch::cat(router_logits, 0).to(torch::kFloat32), -1);
  const torch::Tensor chosen = std::get<1>(probs.topk(top_k, -1));                     // [N, k]
  const torch::Tensor mask = torch::one_hot(chosen, num_experts).to(torch::kFloat32);  // [N, k, E]
  const torch::Tensor tokens_per_expert = mask.mean(0);                                // [k, E]
  const torch::Tensor router_prob_per_expert = probs.mean(0);                          // [E]
  return (tokens_per_expert * router_prob_per_expert.unsqueeze(0)).sum() *
         static_cast<double>(num_experts);
}

torch::Tensor RouterZLoss(const std::vector<torch::Tensor>& router_logits) {
  if (router_logits.empty()) return torch::zeros({}, torch::kFloat32);
  const torch::Tensor logits = torch::cat(router_logits, 0).to(torch::kFloat32);
  return torch::logsumexp(logits, -1).pow(2).mean();
}

double ExpertLoadImbalance(const torch::Tensor& load) {
  const torch::Tensor counts = load.to(torch::kFloat64);
  const double mean = counts.mean().item<double>();
  return mean > 0 ? counts.max().item<double>() / mean : 0.0;
}

}  // namespace lockstep
