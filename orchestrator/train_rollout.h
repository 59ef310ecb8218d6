// A generated sample as the trainer receives it: GenerateResponse (or a multi-turn episode) ->
// lockstep.v1.Rollout.
//
// A multi-turn episode (rewards/episode.h) becomes one sample whose completion is everything
// after the prompt — observation 0, turn 1, observation 1, turn 2, ... — with the environment's
// tokens marked by weight version -1 and log-prob NaN. In the Rollout those tokens get
// loss_mask = false (no loss, no parity) and, because the trainer accepts only versions it
// knows, the version of the sample's earliest model token. A plain single-turn sample has no
// such tokens and goes through unchanged with an empty (all-true) loss mask.
//
// Free functions on values: thread-compatible.
#ifndef LOCKSTEP_ORCHESTRATOR_TRAIN_ROLLOUT_H_
#define LOCKSTEP_ORCHESTRATOR_TRAIN_ROLLOUT_H_

#include <cstdint>
#include <vector>

#include "proto/generator.pb.h"
#include "proto/trainer.pb.h"
#include "rewards/episode.h"

namespace lockstep::orchestrator {

// The weight version that marks a token the environment added (not sampled by the model).
inline constexpr int64_t kEnvironmentTokenVersion = -1;

// The episode's trajectory as a sample: completion tokens, log-probs (NaN for observation
// tokens) and weight versions (kEnvironmentTokenVersion for observation tokens).
v1::GenerateResponse EpisodeToSample(const rewards::EpisodeResult& episode, int64_t sample_index);

// The weight versions of the model's own tokens (the environment's are left out): what the
// staleness bound applies to.
std::vector<int64_t> ModelTokenVersions(const v1::GenerateResponse& sample);

// Tokens the model sampled / tokens the environment added.
int64_t NumModelTokens(const v1::GenerateResponse& sample);
int64_t NumEnvironmentTokens(const v1::GenerateResponse& sample);

// Appends the sample as a Rollout of group `group_id` with `advantage`. The loss mask is left
// empty (all true) when every token is the model's, else true exactly on the model's tokens.
v1::Rollout* AddTrainRollout(const std::vector<int64_t>& prompt_ids,
                             const v1::GenerateResponse& sample, double advantage, int64_t group_id,
                             v1::TrainStepRequest* request);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_TRAIN_ROLLOUT_H_
