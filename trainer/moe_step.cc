#include "trainer/moe_step.h"

#include <algorithm>

namespace lockstep::trainer {

int64_t RoutedPerToken(const ModelConfig& config) {
  return static_cast<int64_t>(config.SparseLayers().size()) * config.num_experts_per_tok;
}

MoeStep::MoeStep(const ModelConfig& config, const TrainerOptions& options, double local_rows,
                 double global_rows)
    : num_experts_(config.num_experts),
      top_k_(config.num_experts_per_tok),
      aux_coef_(options.moe_aux_loss_coef),
      z_coef_(options.moe_z_loss_coef),
      local_rows_(local_rows),
      global_rows_(global_rows),
      layers_(config.SparseLayers()) {
  sparse_ = !layers_.empty();
  for (size_t i = 0; i < layers_.size(); ++i) {
    load_.push_back(torch::zeros({num_experts_}, torch::kInt64));  // one storage each
  }
}

torch::Tensor MoeStep::MicroBatchLoss(int64_t rows) {
  torch::Tensor term = torch::zeros({}, torch::kFloat32);
  if (!sparse_) return term;
  for (const RoutingRecorder::Layer& layer : recorder_.layers()) {
    const auto at = std::find(layers_.begin(), layers_.end(), layer.layer);
    if (at == layers_.end() || !layer.routing.load.defined()) continue;
    load_[at - layers_.begin()] += layer.routing.load;
  }
  std::vector<torch::Tensor> logits = recorder_.RouterLogits();
  if (aux_coef_ == 0 && z_coef_ == 0) {
    for (torch::Tensor& l : logits) l = l.detach();  // figures only: no graph
  }
  // This micro-batch's rows as a share of the mean over the step (both weights the same).
  const double local_share = local_rows_ > 0 ? static_cast<double>(rows) / local_rows_ : 0.0;
  const double global_share = global_rows_ > 0 ? static_cast<double>(rows) / global_rows_ : 0.0;
  const torch::Tensor aux = LoadBalancingLoss(logits, num_experts_, top_k_);
  const torch::Tensor z = RouterZLoss(logits);
  aux_sum_ += local_share * aux.item<double>();
  z_sum_ += local_share * z.item<double>();
  if (aux_coef_ > 0) term = term + (aux_coef_ * global_share) * aux;
  if (z_coef_ > 0) term = term + (z_coef_ * global_share) * z;
  return term;
}

void MoeStep::CompareRouting(int64_t rollout, int64_t position, int64_t row,
                             const int32_t* generator) {
  if (!sparse_) return;
  ++routing_.routing_tokens_compared;
  const std::vector<int32_t> trainer = recorder_.RowExperts(row);  // [sparse layer][k]
  const auto differ = std::mismatch(trainer.begin(), trainer.end(), generator).first;
  if (differ == trainer.end()) return;
  if (routing_.routing_tokens_disagreeing++ == 0) {
    routing_.first_disagreement_rollout = rollout;
    routing_.first_disagreement_position = position;
    routing_.first_disagreement_layer = layers_[(differ - trainer.begin()) / top_k_];
  }
}

std::optional<MoeStepStats> MoeStep::Finish() const {
  if (!sparse_) return std::nullopt;
  MoeStepStats stats = routing_;
  stats.aux_loss = aux_sum_;
  stats.z_loss = z_sum_;
  stats.sparse_layers = layers_;
  for (const torch::Tensor& load : load_) {
    const torch::Tensor counts = load.contiguous();
    const int64_t* p = counts.data_ptr<int64_t>();
    stats.expert_load.emplace_back(p, p + counts.numel());
    stats.load_imbalance_max = std::max(stats.load_imbalance_max, ExpertLoadImbalance(load));
  }
  return stats;
}

}  // namespace lockstep::trainer
