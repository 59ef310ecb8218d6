#include "model/routing_recorder.h"

#include <set>

#include "absl/strings/str_cat.h"

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

std::vector<int64_t> RoutingRecorder::SparseLayers() const {
  std::set<int64_t> layers;
  for (const Layer& layer : layers_) layers.insert(layer.layer);
  return {layers.begin(), layers.end()};
}

torch::Tensor RoutingRecorder::Experts(int64_t layer) const {
  std::vector<torch::Tensor> rows;
  for (const Layer& entry : layers_) {
    if (entry.layer == layer && entry.routing.experts.defined()) {
      rows.push_back(entry.routing.experts);
    }
  }
  return rows.empty() ? torch::Tensor() : torch::cat(rows, 0);
}

std::vector<int32_t> RoutingRecorder::RowExperts(int64_t row) const {
  std::vector<int32_t> experts;
  for (const Layer& layer : layers_) {
    const torch::Tensor choices = layer.routing.experts.contiguous();  // int64 [rows, k]
    const int64_t k = choices.size(1);
    const int64_t* chosen = choices.data_ptr<int64_t>() + row * k;
    experts.insert(experts.end(), chosen, chosen + k);
  }
  return experts;
}

std::string RoutingAgreement::ToString() const {
  std::string text =
      absl::StrCat(tokens_disagreeing, " of ", tokens_compared, " (layer, token) routings differ");
  if (first_layer >= 0) absl::StrAppend(&text, "; first: layer ", first_layer, " row ", first_row);
  return text;
}

absl::StatusOr<RoutingAgreement> CompareRouting(const RoutingRecorder& reference,
                                                const RoutingRecorder& candidate) {
  const std::vector<int64_t> layers = reference.SparseLayers();
  if (layers != candidate.SparseLayers()) {
    return absl::InvalidArgumentError("routing: the two recordings cover different layers");
  }
  RoutingAgreement agreement;
  for (int64_t layer : layers) {
    const torch::Tensor a = reference.Experts(layer), b = candidate.Experts(layer);
    if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "routing: layer ", layer, " has ", a.defined() ? c10::str(a.sizes()) : "no",
          " choices on one side and ", b.defined() ? c10::str(b.sizes()) : "no", " on the other"));
    }
    const torch::Tensor differs = torch::ne(a, b).any(1);
    const int64_t count = differs.sum().item<int64_t>();
    agreement.tokens_compared += a.size(0);
    agreement.tokens_disagreeing += count;
    if (count > 0 && agreement.first_layer < 0) {
      agreement.first_layer = layer;
      agreement.first_row = torch::nonzero(differs)[0][0].item<int64_t>();
    }
  }
  return agreement;
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
