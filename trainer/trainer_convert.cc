#include "trainer/trainer_convert.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::trainer {
namespace {

template <typename T, typename Repeated>
std::vector<T> ToVector(const Repeated& repeated) {
  return std::vector<T>(repeated.begin(), repeated.end());
}

}  // namespace

std::vector<Rollout> FromProto(const v1::TrainStepRequest& proto) {
  std::vector<Rollout> rollouts;
  rollouts.reserve(proto.rollouts_size());
  for (const v1::Rollout& source : proto.rollouts()) {
    Rollout rollout;
    rollout.prompt_tokens = ToVector<int64_t>(source.prompt_token_ids());
    rollout.completion_tokens = ToVector<int64_t>(source.completion_token_ids());
    rollout.behaviour_logprobs = ToVector<float>(source.behaviour_logprobs());
    rollout.weight_versions = ToVector<int64_t>(source.weight_versions());
    rollout.loss_mask.reserve(source.loss_mask_size());
    for (bool keep : source.loss_mask()) rollout.loss_mask.push_back(keep ? 1 : 0);
    rollout.advantage = source.advantage();
    rollout.group_id = source.group_id();
    rollout.routed_experts = ToVector<int32_t>(source.routed_experts());
    rollouts.push_back(std::move(rollout));
  }
  return rollouts;
}

std::vector<SftExample> FromProto(const v1::SftStepRequest& proto) {
  std::vector<SftExample> examples;
  examples.reserve(proto.examples_size());
  for (const v1::SftExample& source : proto.examples()) {
    examples.push_back({ToVector<int64_t>(source.prompt_token_ids()),
                        ToVector<int64_t>(source.completion_token_ids())});
  }
  return examples;
}

absl::StatusOr<LogprobsQuery> FromProto(const v1::ComputeLogprobsRequest& proto) {
  if (!std::isfinite(proto.temperature()) || proto.temperature() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be finite and >= 0 (0 = 1.0), got ", proto.temperature()));
  }
  LogprobsQuery query;
  query.temperature = proto.temperature() == 0 ? 1.0 : proto.temperature();
  query.sequences.reserve(proto.sequences_size());
  for (const v1::LogprobSequence& source : proto.sequences()) {
    query.sequences.push_back({ToVector<int64_t>(source.prompt_token_ids()),
                               ToVector<int64_t>(source.completion_token_ids())});
  }
  return query;
}

void ToProto(const ParityStats& parity, v1::ParityStats* proto) {
  proto->set_tokens_compared(parity.tokens_compared);
  proto->set_tokens_mismatched(parity.tokens_mismatched);
  proto->set_max_abs_diff(parity.max_abs_diff);
  proto->set_mean_diff(parity.mean_diff);
  proto->set_k3(parity.k3);
  proto->set_has_mismatch(parity.has_mismatch);
  proto->set_mismatch_rollout(parity.mismatch_rollout);
  proto->set_mismatch_position(parity.mismatch_position);
  proto->set_mismatch_trainer_logprob(parity.mismatch_trainer_logprob);
  proto->set_mismatch_generator_logprob(parity.mismatch_generator_logprob);
  for (int64_t rollout : parity.mismatched_rollouts) proto->add_mismatched_rollouts(rollout);
}

void ToProto(const StepMetrics& metrics, v1::StepMetrics* proto) {
  proto->set_step(metrics.step);
  proto->set_weight_version(metrics.weight_version);
  proto->set_loss(metrics.loss);
  proto->set_grad_norm(metrics.grad_norm);
  proto->set_lr(metrics.lr);
  proto->set_entropy(metrics.entropy);
  proto->set_ratio_mean(metrics.ratio_mean);
  proto->set_clipped_fraction(metrics.clipped_fraction);
  proto->set_tokens(metrics.tokens);
  proto->set_sequences(metrics.sequences);
  proto->set_kl(metrics.kl);
  ToProto(metrics.parity, proto->mutable_parity());
  proto->set_seconds(metrics.seconds);
  proto->set_micro_batches(metrics.micro_batches);
  if (metrics.checkpoint_blocking_ms) {
    proto->set_checkpoint_blocking_ms(*metrics.checkpoint_blocking_ms);
  }
  if (metrics.checkpoint_write_ms) proto->set_checkpoint_write_ms(*metrics.checkpoint_write_ms);
  if (metrics.moe) {
    v1::MoeStats* moe = proto->mutable_moe();
    moe->set_aux_loss(metrics.moe->aux_loss);
    moe->set_z_loss(metrics.moe->z_loss);
    moe->mutable_sparse_layers()->Add(metrics.moe->sparse_layers.begin(),
                                      metrics.moe->sparse_layers.end());
    moe->set_num_experts(metrics.moe->expert_load.empty()
                             ? 0
                             : static_cast<int64_t>(metrics.moe->expert_load.front().size()));
    for (const std::vector<int64_t>& layer : metrics.moe->expert_load) {
      moe->mutable_expert_load()->Add(layer.begin(), layer.end());
    }
    moe->set_load_imbalance_max(metrics.moe->load_imbalance_max);
    moe->set_routing_tokens_compared(metrics.moe->routing_tokens_compared);
    moe->set_routing_tokens_disagreeing(metrics.moe->routing_tokens_disagreeing);
    moe->set_first_disagreement_rollout(metrics.moe->first_disagreement_rollout);
    moe->set_first_disagreement_position(metrics.moe->first_disagreement_position);
    moe->set_first_disagreement_layer(metrics.moe->first_disagreement_layer);
  }
}

void ToProto(const std::vector<std::vector<float>>& logprobs, v1::ComputeLogprobsResponse* proto) {
  for (const std::vector<float>& sequence : logprobs) {
    proto->add_sequences()->mutable_logprobs()->Add(sequence.begin(), sequence.end());
  }
}

}  // namespace lockstep::trainer
