// The multi-turn episode driver: runs one episode of an Environment against a policy given as a
// callback, and returns the trajectory the trainer needs. It knows nothing of the generator or
// the tokenizer: the orchestrator plugs them in as `generate` and `encode`.
//
//   Reset -> observation_0
//   repeat: generate(context) -> turn_k;  Step(turn_k) -> observation_k, reward_k, done
//   until done, or max_turns turns, or the token budget is spent.
//
// Trajectory layout: prompt_tokens is the prompt as given. completion_tokens is everything after
// it, in order: observation_0, turn_1, observation_1, turn_2, ... Per completion token:
// logprobs/weight_versions come from the generator for the model's tokens and are NaN / -1 for
// observation tokens; loss_mask is 1 exactly on the model's own tokens.
#ifndef LOCKSTEP_REWARDS_EPISODE_H_
#define LOCKSTEP_REWARDS_EPISODE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rewards/environment.h"

namespace lockstep::rewards {

// One model turn, from the generator.
struct GeneratedTurn {
  std::vector<int32_t> tokens;           // the sampled tokens (the context is not repeated)
  std::vector<float> logprobs;           // one per token
  std::vector<int64_t> weight_versions;  // one per token
  std::string text;  // the tokens decoded; sent to the environment as the action
};

// Samples the model's next turn given the whole context so far (prompt + completion so far).
// An error fails the episode.
using GenerateFn =
    std::function<absl::StatusOr<GeneratedTurn>(const std::vector<int32_t>& context)>;

// Tokenizes an observation given as text (applying the chat template for `role` when set).
// Never called for observations that carry token ids. An error fails the episode.
using EncodeFn =
    std::function<absl::StatusOr<std::vector<int32_t>>(const Observation& observation)>;

struct EpisodeOptions {
  int max_turns = 8;  // model turns at most (also capped by the environment's own max_turns); >= 1
  // Completion tokens (turns + observations) at most; the episode ends, truncated, at the first
  // turn or observation that reaches it (the turn is kept). 0: no limit.
  int64_t max_completion_tokens = 0;
};

struct EpisodeResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> completion_tokens;
  std::vector<float> logprobs;               // NaN for observation tokens
  std::vector<int64_t> weight_versions;      // -1 for observation tokens
  std::vector<uint8_t> loss_mask;            // 1: the model's token; 0: an observation's
  int num_turns = 0;                         // model turns taken
  std::vector<double> step_rewards;          // one per Step that returned
  double episode_return = 0.0;               // sum of step_rewards
  std::map<std::string, double> sub_scores;  // summed over steps
  bool done = false;                         // the environment ended the episode
  bool truncated = false;                    // stopped by max_turns or the token budget before done
  // The episode failed (Reset, generate, encode or Step returned an error); `error` says where.
  // A failed episode is excluded from advantages, never scored 0.
  bool failed = false;
  std::string error;
};

// Runs one episode to the end. Calls environment.Close when the episode ends without the
// environment saying done (truncated or failed), so the environment frees its state. Blocking;
// safe to call concurrently for different episodes if `generate`, `encode` and the environment
// are.
EpisodeResult RunEpisode(Environment& environment, const EpisodeStart& start,
                         const std::vector<int32_t>& prompt_tokens, const GenerateFn& generate,
                         const EncodeFn& encode, const EpisodeOptions& options = {});

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_EPISODE_H_
