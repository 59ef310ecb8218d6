#include "orchestrator/train_rollout.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::orchestrator {

v1::GenerateResponse EpisodeToSample(const rewards::EpisodeResult& episode, int64_t sample_index) {
  v1::GenerateResponse sample;
  sample.set_sample_index(sample_index);
  for (size_t j = 0; j < episode.completion_tokens.size(); ++j) {
    const bool model_token = j < episode.loss_mask.size() && episode.loss_mask[j] != 0;
    sample.add_token_ids(episode.completion_tokens[j]);
    sample.add_logprobs(model_token && j < episode.logprobs.size()
                            ? episode.logprobs[j]
                            : std::numeric_limits<float>::quiet_NaN());
    sample.add_weight_versions(model_token && j < episode.weight_versions.size()
                                   ? episode.weight_versions[j]
                                   : kEnvironmentTokenVersion);
  }
  sample.set_finish_reason(episode.done ? v1::FINISH_REASON_STOP_TOKEN
                                        : v1::FINISH_REASON_MAX_TOKENS);
  return sample;
}

std::vector<int64_t> ModelTokenVersions(const v1::GenerateResponse& sample) {
  std::vector<int64_t> versions;
  versions.reserve(sample.weight_versions_size());
  for (int64_t version : sample.weight_versions()) {
    if (version != kEnvironmentTokenVersion) versions.push_back(version);
  }
  return versions;
}

int64_t NumModelTokens(const v1::GenerateResponse& sample) {
  return static_cast<int64_t>(
      std::count_if(sample.weight_versions().begin(), sample.weight_versions().end(),
                    [](int64_t v) { return v != kEnvironmentTokenVersion; }));
}

int64_t NumEnvironmentTokens(const v1::GenerateResponse& sample) {
  return sample.weight_versions_size() - NumModelTokens(sample);
}

v1::Rollout* AddTrainRollout(const std::vector<int64_t>& prompt_ids,
                             const v1::GenerateResponse& sample, double advantage, int64_t group_id,
                             v1::TrainStepRequest* request) {
  v1::Rollout* rollout = request->add_rollouts();
  for (int64_t id : prompt_ids) rollout->add_prompt_token_ids(id);
  *rollout->mutable_completion_token_ids() = sample.token_ids();
  *rollout->mutable_behaviour_logprobs() = sample.logprobs();
  rollout->set_advantage(advantage);
  rollout->set_group_id(group_id);
  *rollout->mutable_routed_experts() = sample.routed_experts();
  const std::vector<int64_t> model_versions = ModelTokenVersions(sample);
  if (static_cast<int>(model_versions.size()) == sample.weight_versions_size()) {
    *rollout->mutable_weight_versions() = sample.weight_versions();
    return rollout;  // every token is the model's: empty mask = all true
  }
  const int64_t filler =
      model_versions.empty() ? 0 : *std::min_element(model_versions.begin(), model_versions.end());
  for (int64_t version : sample.weight_versions()) {
    const bool model_token = version != kEnvironmentTokenVersion;
    rollout->add_weight_versions(model_token ? version : filler);
    rollout->add_loss_mask(model_token);
  }
  return rollout;
}

}  // namespace lockstep::orchestrator
