#include "orchestrator/mismatch_recorder.h"

#include <algorithm>

#include "diagnose/mismatch_record.h"

namespace lockstep::orchestrator {

std::string MismatchRecorder::WeightsDirFor(int64_t weight_version) const {
  if (steps_recorded_ >= options_.max_steps) return "";
  return (options_.run_dir / diagnose::MismatchWeightsDir(weight_version)).string();
}

absl::Status MismatchRecorder::Record(int64_t step, int64_t weight_version,
                                      const v1::TrainStepRequest& request,
                                      const v1::ParityStats& parity) {
  if (parity.mismatched_rollouts_size() == 0 || steps_recorded_ >= options_.max_steps) {
    return absl::OkStatus();
  }
  std::vector<diagnose::MismatchRecord> records;
  for (int64_t index : parity.mismatched_rollouts()) {
    if (static_cast<int64_t>(records.size()) >= options_.max_records) break;
    if (index < 0 || index >= request.rollouts_size()) continue;
    const v1::Rollout& rollout = request.rollouts(static_cast<int>(index));
    // A multi-turn transcript holds environment tokens the generator never sampled: a replay
    // by teacher forcing would not be the generator's computation. Not recorded.
    if (std::find(rollout.loss_mask().begin(), rollout.loss_mask().end(), false) !=
        rollout.loss_mask().end()) {
      continue;
    }
    diagnose::MismatchRecord record;
    record.step = step;
    record.rollout = index;
    record.weight_version = weight_version;
    record.weights_dir = diagnose::MismatchWeightsDir(weight_version).string();
    record.prompt_tokens.assign(rollout.prompt_token_ids().begin(),
                                rollout.prompt_token_ids().end());
    record.completion_tokens.assign(rollout.completion_token_ids().begin(),
                                    rollout.completion_token_ids().end());
    record.generator_logprobs.assign(rollout.behaviour_logprobs().begin(),
                                     rollout.behaviour_logprobs().end());
    record.temperature = options_.temperature;
    record.top_k = options_.top_k;
    record.top_p = options_.top_p;
    record.generator_mode = options_.generator_mode;
    record.generator_threads = options_.generator_threads;
    record.trainer_mode = options_.trainer_mode;
    record.trainer_threads = options_.trainer_threads;
    records.push_back(std::move(record));
  }
  if (records.empty()) return absl::OkStatus();
  ++steps_recorded_;
  return diagnose::WriteMismatchRecords(options_.run_dir, step, records);
}

}  // namespace lockstep::orchestrator
