#include "rewards/episode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::rewards {
namespace {

class EpisodeBuilder {
 public:
  EpisodeBuilder(const std::vector<int32_t>& prompt_tokens, const EpisodeOptions& options)
      : options_(options) {
    result_.prompt_tokens = prompt_tokens;
    context_ = prompt_tokens;
  }

  const std::vector<int32_t>& context() const { return context_; }
  EpisodeResult& result() { return result_; }

  // Appends an observation's tokens (masked out of the loss).
  void AddObservation(const std::vector<int32_t>& tokens) {
    Append(tokens);
    result_.logprobs.insert(result_.logprobs.end(), tokens.size(),
                            std::numeric_limits<float>::quiet_NaN());
    result_.weight_versions.insert(result_.weight_versions.end(), tokens.size(), -1);
    result_.loss_mask.insert(result_.loss_mask.end(), tokens.size(), 0);
  }

  // Appends one of the model's turns (trained on).
  void AddTurn(const GeneratedTurn& turn) {
    Append(turn.tokens);
    result_.logprobs.insert(result_.logprobs.end(), turn.logprobs.begin(), turn.logprobs.end());
    result_.weight_versions.insert(result_.weight_versions.end(), turn.weight_versions.begin(),
                                   turn.weight_versions.end());
    result_.loss_mask.insert(result_.loss_mask.end(), turn.tokens.size(), 1);
    ++result_.num_turns;
  }

  bool BudgetSpent() const {
    return options_.max_completion_tokens > 0 &&
           static_cast<int64_t>(result_.completion_tokens.size()) >= options_.max_completion_tokens;
  }

  void Fail(std::string error) {
    result_.failed = true;
    result_.error = std::move(error);
  }

 private:
  void Append(const std::vector<int32_t>& tokens) {
    result_.completion_tokens.insert(result_.completion_tokens.end(), tokens.begin(), tokens.end());
    context_.insert(context_.end(), tokens.begin(), tokens.end());
  }

  const EpisodeOptions& options_;
  EpisodeResult result_;
  std::vector<int32_t> context_;
};

// The observation's tokens: as given, or encoded from text. Empty text encodes to nothing.
absl::StatusOr<std::vector<int32_t>> ObservationTokens(const Observation& observation,
                                                       const EncodeFn& encode) {
  if (observation.token_ids) return *observation.token_ids;
  if (observation.text.empty()) return std::vector<int32_t>();
  return encode(observation);
}

}  // namespace

EpisodeResult RunEpisode(Environment& environment, const EpisodeStart& start,
                         const std::vector<int32_t>& prompt_tokens, const GenerateFn& generate,
                         const EncodeFn& encode, const EpisodeOptions& options) {
  EpisodeBuilder episode(prompt_tokens, options);
  EpisodeResult& result = episode.result();
  if (options.max_turns < 1) {
    episode.Fail("episode options: max_turns must be >= 1");
    return std::move(result);
  }
  absl::StatusOr<ResetResult> reset = environment.Reset(start);
  if (!reset.ok()) {
    episode.Fail(absl::StrCat("reset: ", reset.status().ToString()));
    return std::move(result);
  }
  const int max_turns =
      reset->max_turns > 0 ? std::min(options.max_turns, reset->max_turns) : options.max_turns;

  absl::StatusOr<std::vector<int32_t>> observation = ObservationTokens(reset->observation, encode);
  if (!observation.ok()) {
    episode.Fail(absl::StrCat("encode observation 0: ", observation.status().ToString()));
  } else {
    episode.AddObservation(*observation);
  }

  while (!result.failed && !result.done) {
    if (result.num_turns >= max_turns || episode.BudgetSpent()) {
      result.truncated = true;
      break;
    }
    absl::StatusOr<GeneratedTurn> turn = generate(episode.context());
    if (!turn.ok()) {
      episode.Fail(
          absl::StrCat("generate turn ", result.num_turns + 1, ": ", turn.status().ToString()));
      break;
    }
    if (turn->logprobs.size() != turn->tokens.size() ||
        turn->weight_versions.size() != turn->tokens.size()) {
      episode.Fail(absl::StrCat("generate turn ", result.num_turns + 1, ": ", turn->tokens.size(),
                                " tokens but ", turn->logprobs.size(), " logprobs and ",
                                turn->weight_versions.size(), " weight versions"));
      break;
    }
    episode.AddTurn(*turn);

    StepInput step_input;
    step_input.episode_id = start.episode_id;
    step_input.action = turn->text;
    step_input.action_token_ids = turn->tokens;
    absl::StatusOr<StepResult> step = environment.Step(step_input);
    if (!step.ok()) {
      episode.Fail(absl::StrCat("step ", result.num_turns, ": ", step.status().ToString()));
      break;
    }
    result.step_rewards.push_back(step->reward);
    result.episode_return += step->reward;
    for (const auto& [name, value] : step->sub_scores) result.sub_scores[name] += value;
    if (step->done) {
      result.done = true;
      break;
    }
    // The observation after the last allowed turn would never be seen by the model: leave it out.
    if (result.num_turns >= max_turns || episode.BudgetSpent()) {
      result.truncated = true;
      break;
    }
    observation = ObservationTokens(step->observation, encode);
    if (!observation.ok()) {
      episode.Fail(absl::StrCat("encode observation ", result.num_turns, ": ",
                                observation.status().ToString()));
      break;
    }
    episode.AddObservation(*observation);
  }
  if (!result.done) {
    // Truncated or failed: the environment still holds the episode. Best effort; a Close that
    // fails changes nothing about the trajectory.
    environment.Close(start.episode_id).IgnoreError();
  }
  return std::move(result);
}

}  // namespace lockstep::rewards
