#include "orchestrator/environment_rollouts.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "orchestrator/train_rollout.h"
#include "orchestrator/valid_utf8.h"
#include "rewards/episode.h"

namespace lockstep::orchestrator {
namespace {

// SplitMix64, for per-episode and per-turn seeds.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Room left after the last turn for the observation that may follow it (masked, but it still
// has to fit the trainer's sequence length).
constexpr int64_t kObservationMargin = 256;

}  // namespace

struct EnvironmentRollouts::PromptEpisodes {
  EpisodeRequest request;
  EpisodesDone done;
  std::mutex mu;
  int64_t episodes_left = 0;
  EpisodeBatch batch;
  absl::Status error;  // the first generator error (or Cancelled at shutdown)
};

EnvironmentRollouts::EnvironmentRollouts(rewards::Environment* environment,
                                         const Tokenizer* tokenizer,
                                         EnvironmentRolloutOptions options)
    : environment_(environment),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      id_prefix_(NewAuthToken().substr(0, 12)),
      // The backlog is bounded by the caller: the loop's admission control limits the prompts
      // in flight.
      queue_({.num_workers = std::max(1, options_.num_threads),
              .max_queued = WorkQueueOptions::kBoundedByCaller,
              .at_destruction = WorkQueueOptions::AtDestruction::kCancelQueued}) {}

EnvironmentRollouts::~EnvironmentRollouts() = default;

void EnvironmentRollouts::RunAsync(EpisodeRequest request, EpisodesDone done) {
  auto prompt = std::make_shared<PromptEpisodes>();
  const int64_t n = std::max<int64_t>(1, options_.samples_per_prompt);
  prompt->request = std::move(request);
  prompt->done = std::move(done);
  prompt->episodes_left = n;
  prompt->batch.samples.resize(n);
  prompt->batch.outcomes.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    const bool accepted = queue_.TrySubmit(
        [this, prompt, k] {
          RunEpisodeTask(*prompt, k);
          EpisodeEnded(*prompt);
        },
        [this, prompt] { Cancel(*prompt); });
    if (!accepted) Cancel(*prompt);  // only while shutting down
  }
}

EnvironmentTotals EnvironmentRollouts::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

void EnvironmentRollouts::Cancel(PromptEpisodes& prompt) {
  {
    std::lock_guard<std::mutex> lock(prompt.mu);
    if (prompt.error.ok()) prompt.error = absl::CancelledError("environment rollouts shut down");
  }
  EpisodeEnded(prompt);
}

void EnvironmentRollouts::RunEpisodeTask(PromptEpisodes& prompt, int64_t k) {
  const EpisodeRequest& request = prompt.request;

  rewards::EpisodeStart start;
  start.episode_id = absl::StrCat(id_prefix_, "-p", request.index, "-s", k);
  start.prompt = request.prompt_text;
  start.reference = request.reference;
  start.metadata = request.metadata;
  start.seed = Mix(request.seed + static_cast<uint64_t>(k));
  const std::vector<int32_t> prompt_tokens(request.prompt_ids.begin(), request.prompt_ids.end());

  absl::Status generate_error;
  uint64_t turn = 0;
  const rewards::GenerateFn generate =
      [&](const std::vector<int32_t>& context) -> absl::StatusOr<rewards::GeneratedTurn> {
    v1::GenerateRequest call;
    for (int32_t id : context) call.add_prompt_token_ids(id);
    call.set_n(1);
    *call.mutable_sampling() = options_.sampling;
    call.mutable_sampling()->set_seed(Mix(start.seed ^ Mix(++turn)));
    absl::StatusOr<std::vector<v1::GenerateResponse>> samples =
        request.generator->Generate(call, options_.generate_timeout);
    if (!samples.ok()) {
      generate_error = samples.status();
      return samples.status();
    }
    const v1::GenerateResponse& sample = samples->front();
    rewards::GeneratedTurn out;
    out.tokens.assign(sample.token_ids().begin(), sample.token_ids().end());
    out.logprobs.assign(sample.logprobs().begin(), sample.logprobs().end());
    out.weight_versions.assign(sample.weight_versions().begin(), sample.weight_versions().end());
    absl::StatusOr<std::string> text = tokenizer_->Decode(out.tokens, /*skip_special_tokens=*/true);
    out.text = text.ok() ? ValidUtf8(*text) : "";
    return out;
  };
  // An observation with a role is the conversation's next message in the job's chat template
  // (the model's turn ended on the template's end-of-turn token); without one it is appended
  // verbatim.
  const rewards::EncodeFn encode =
      [&](const rewards::Observation& observation) -> absl::StatusOr<std::vector<int32_t>> {
    std::string text = observation.text;
    if (!observation.role.empty()) {
      ChatMessage message;
      message.role = observation.role;
      message.content = observation.text;
      absl::StatusOr<std::string> rendered = ObservationText(message, options_.format);
      if (!rendered.ok()) return rendered.status();
      text = *std::move(rendered);
    }
    return tokenizer_->Encode(text);
  };

  rewards::EpisodeOptions episode_options;
  episode_options.max_turns = options_.max_turns;
  episode_options.max_completion_tokens = std::max<int64_t>(
      1, options_.max_sequence_length - static_cast<int64_t>(prompt_tokens.size()) -
             options_.sampling.max_tokens() - kObservationMargin);
  const rewards::EpisodeResult result =
      rewards::RunEpisode(*environment_, start, prompt_tokens, generate, encode, episode_options);

  rewards::ItemOutcome outcome;
  if (result.failed) {
    outcome.error = absl::StrCat("environment ", environment_->name(), ": episode ",
                                 start.episode_id, ": ", result.error);
  } else {
    outcome.ok = true;
    outcome.reward = result.episode_return;
    outcome.sub_scores = result.sub_scores;
    outcome.sub_scores["turns"] = result.num_turns;
  }
  {
    std::lock_guard<std::mutex> lock(prompt.mu);
    prompt.batch.samples[k] = EpisodeToSample(result, k);
    prompt.batch.outcomes[k] = std::move(outcome);
    if (!generate_error.ok() && prompt.error.ok()) prompt.error = generate_error;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++totals_.episodes;
  totals_.episodes_failed += result.failed ? 1 : 0;
  totals_.episodes_truncated += result.truncated ? 1 : 0;
  totals_.turns += result.num_turns;
}

void EnvironmentRollouts::EpisodeEnded(PromptEpisodes& prompt) {
  {
    std::lock_guard<std::mutex> lock(prompt.mu);
    if (--prompt.episodes_left > 0) return;
  }
  if (!prompt.error.ok()) {
    prompt.done(prompt.error);
  } else {
    prompt.done(std::move(prompt.batch));
  }
}

}  // namespace lockstep::orchestrator
