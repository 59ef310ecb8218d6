// Multi-turn rollouts for `lockstep run` with an [environment]: each prompt's n samples are n
// episodes of the environment (rewards/episode.h's driver), every model turn sampled by the
// prompt's generator, every observation tokenized here and masked out of the loss
// (train_rollout.h). An episode's return is its reward.
//
// Episodes run on this object's own worker threads (each blocks on its generator and
// environment calls), never on the RL loop's thread: the loop submits a prompt and goes on; the
// prompt's `done` runs on a worker once its n episodes have ended.
//
// Outcomes: an episode the environment failed (Reset/Step error, unreachable server) is a
// failed item (excluded from advantages and counted, never reward 0). A generator error is not
// the environment's fault: it fails the whole prompt with that error, as in single-turn
// generation.
//
// Thread safety: RunAsync and totals() are thread-safe. The destructor starts no new episode,
// answers prompts still queued with Cancelled, and joins the workers (running episodes finish).
#ifndef LOCKSTEP_ORCHESTRATOR_ENVIRONMENT_ROLLOUTS_H_
#define LOCKSTEP_ORCHESTRATOR_ENVIRONMENT_ROLLOUTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/work_queue.h"
#include "data/prompt_format.h"
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/generator_client.h"
#include "proto/generator.pb.h"
#include "rewards/environment.h"
#include "rewards/reward_scorer.h"

namespace lockstep::orchestrator {

struct EnvironmentRolloutOptions {
  int64_t samples_per_prompt = 8;  // episodes per prompt
  int max_turns = 1;               // model turns per episode at most
  // prompt + completion tokens at most (the trainer's max_sequence_length); the episode stops,
  // truncated, before a turn could pass it.
  int64_t max_sequence_length = 2048;
  v1::SamplingParams sampling;  // per turn (max_tokens = tokens per turn); the seed is per turn
  // The job's chat template: an observation with a role is rendered as its next message.
  PromptFormat format;
  absl::Duration generate_timeout = absl::Minutes(10);
  int num_threads = 8;  // episodes running at once
};

// One prompt's episodes.
struct EpisodeRequest {
  int64_t index = 0;  // prompt number (episode ids and seeds derive from it)
  std::string prompt_text;
  std::vector<int64_t> prompt_ids;
  std::string reference;
  std::map<std::string, std::string> metadata;
  uint64_t seed = 0;
  GeneratorClient* generator = nullptr;  // must outlive the call
};

// One sample per episode (train_rollout.h's layout), by sample index, and its outcome.
struct EpisodeBatch {
  std::vector<v1::GenerateResponse> samples;
  std::vector<rewards::ItemOutcome> outcomes;
};
using EpisodesDone = std::function<void(absl::StatusOr<EpisodeBatch>)>;

// Counters since creation.
struct EnvironmentTotals {
  int64_t episodes = 0;
  int64_t episodes_failed = 0;     // excluded from advantages
  int64_t episodes_truncated = 0;  // stopped by max_turns or the token budget
  int64_t turns = 0;               // model turns, all episodes
};

class EnvironmentRollouts {
 public:
  // `environment` and `tokenizer` are not owned and must outlive this object.
  EnvironmentRollouts(rewards::Environment* environment, const Tokenizer* tokenizer,
                      EnvironmentRolloutOptions options);
  ~EnvironmentRollouts();
  EnvironmentRollouts(const EnvironmentRollouts&) = delete;
  EnvironmentRollouts& operator=(const EnvironmentRollouts&) = delete;

  // Queues the prompt's samples_per_prompt episodes and returns at once; `done` runs exactly
  // once, on a worker thread.
  void RunAsync(EpisodeRequest request, EpisodesDone done);

  EnvironmentTotals totals() const;

 private:
  struct PromptEpisodes;

  // Runs episode `k` of `prompt` (on a worker thread).
  void RunEpisodeTask(PromptEpisodes& prompt, int64_t k);
  // Settles one episode of `prompt` that never ran (shutdown): the prompt fails with Cancelled.
  void Cancel(PromptEpisodes& prompt);
  // Records one episode's result; runs the prompt's `done` after its last one.
  void EpisodeEnded(PromptEpisodes& prompt);

  rewards::Environment* const environment_;
  const Tokenizer* const tokenizer_;
  const EnvironmentRolloutOptions options_;
  const std::string id_prefix_;  // unique per job, so episode ids never collide on a server

  mutable std::mutex mu_;
  EnvironmentTotals totals_ ABSL_GUARDED_BY(mu_);
  WorkQueue queue_;  // last: destroyed first, while what its episodes use still exists
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_ENVIRONMENT_ROLLOUTS_H_
