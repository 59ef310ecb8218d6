// The typed record of one RL step: what the loop fills (rl_loop.h), metrics.jsonl holds one per
// line (metrics_log.h), the console progress line shows (progress_line.h) and the report plots
// (report.h). The struct is the schema: the JSON keys are the member names.
//
// Every member but `step` is optional to readers, so that a file written by an older build, or
// a hand-made one, reads back with what it has; the loop sets every member it knows (episodes
// only in a multi-turn job). Unset members are left out of the written line.
//
// RlTotals folds records into the figures of a whole run or job (summary.json): the loop keeps
// one for the steps it ran, the job one over every step in metrics.jsonl, resumes included.
#ifndef LOCKSTEP_ORCHESTRATOR_STEP_RECORD_H_
#define LOCKSTEP_ORCHESTRATOR_STEP_RECORD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "orchestrator/json_optional.h"
#include "orchestrator/staleness.h"

namespace lockstep::orchestrator {

// Trainer/generator parity over the step's policy-age-0 tokens (model/parity.h):
// Δ = trainer − generator log-prob; k3 = mean(exp(Δ) − 1 − Δ) estimates KL(generator ‖ trainer).
struct ParityRecord {
  int64_t tokens_compared = 0;
  int64_t tokens_mismatched = 0;  // not bit-identical
  double max_abs_diff = 0;        // max |Δ|
  double mean_diff = 0;           // mean Δ
  double k3 = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ParityRecord, tokens_compared, tokens_mismatched,
                                                max_abs_diff, mean_diff, k3)

// Seconds of one step: waiting for rollouts (generate, reward), the train step, the weight
// sync, the rest (idle), and the whole step.
struct StepTimes {
  double generate = 0;
  double reward = 0;
  double train = 0;
  double sync = 0;
  double idle = 0;
  double total = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StepTimes, generate, reward, train, sync, idle,
                                                total)

// Multi-turn episodes: of a step (those that ended while it ran), or of a run.
struct EpisodeCounts {
  int64_t episodes = 0;
  int64_t failed = 0;     // excluded from advantages
  int64_t truncated = 0;  // stopped by max_turns or the token budget
  int64_t turns = 0;      // model turns
  EpisodeCounts& operator+=(const EpisodeCounts& other);
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EpisodeCounts, episodes, failed, truncated, turns)

// Samples per policy age. JSON: {"<age>": count, …} (JSON keys are text).
struct AgeCounts {
  AgeHistogram counts;
};
void to_json(nlohmann::json& json, const AgeCounts& ages);
void from_json(const nlohmann::json& json, AgeCounts& ages);

// A service restarted while a step ran (a trainer restarted between steps: in the first step
// after the rollback): its child name, how it died, and the seconds from its death until it
// served again (a generator: until it held the current weights).
struct RestartRecord {
  std::string service;  // "generator1", "trainer", "reward_<name>"
  std::string cause;    // "was killed by signal 9 (Killed)"
  double recovery_s = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RestartRecord, service, cause, recovery_s)

// A restarted generator's first samples: the seconds from its death until the first generation
// call of its new process returned (the n samples of a prompt arrive together). In the first
// step record written after they arrived: the restart step's when the new process took lost
// prompts that were waiting for a generator, else a later one (the live generators were idle
// first and took them).
struct FirstSampleRecord {
  std::string service;  // "generator1"
  double first_sample_s = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FirstSampleRecord, service, first_sample_s)

// Where trainer and generator first routed a token differently: rollout (batch index), its
// completion position, and the first sparse layer that differs.
struct RoutingDisagreement {
  int64_t rollout = -1;
  int64_t position = -1;
  int64_t layer = -1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RoutingDisagreement, rollout, position, layer)

// A mixture-of-experts model's step (the trainer's MoeStats): aux losses before their
// coefficients, tokens routed to each expert of each sparse layer, the worst layer's max/mean,
// and routing agreement with the generator over policy-age-0 tokens (0 disagreeing is the
// batch-invariant claim: no routing replay needed).
struct MoeRecord {
  double aux_loss = 0;
  double z_loss = 0;
  double load_imbalance_max = 0;
  std::vector<int64_t> sparse_layers;
  std::vector<std::vector<int64_t>> expert_load;  // [sparse layer][expert]
  int64_t routing_tokens_compared = 0;
  int64_t routing_tokens_disagreeing = 0;
  std::optional<RoutingDisagreement> first_disagreement;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MoeRecord, aux_loss, z_loss, load_imbalance_max,
                                                sparse_layers, expert_load,
                                                routing_tokens_compared,
                                                routing_tokens_disagreeing, first_disagreement)

struct StepRecord {
  int64_t step = 0;  // RL steps done after this one (1-based)
  std::optional<int64_t> weight_version;
  // Learning: rewards of the scored items, the trainer's figures.
  std::optional<double> reward_mean;
  std::optional<double> accuracy;  // share of scored items with reward >= 1
  std::optional<double> loss;
  std::optional<double> grad_norm;  // before clipping
  std::optional<double> lr;
  std::optional<double> entropy;
  std::optional<double> ratio_mean;
  std::optional<double> clipped_fraction;
  // Reward items (samples) of the batch: sent == scored + failed; failed items are left out of
  // the advantages, never scored 0.
  std::optional<int64_t> samples;
  std::optional<int64_t> reward_items_sent;
  std::optional<int64_t> reward_items_scored;
  std::optional<int64_t> reward_items_failed;
  std::optional<int64_t> groups_dropped;
  std::optional<int64_t> rollouts_trained;
  std::optional<int64_t> rollout_model_tokens;        // loss-mask tokens sent to the trainer
  std::optional<int64_t> rollout_environment_tokens;  // masked-out observation tokens
  // Throughput.
  std::optional<int64_t> gen_tokens;  // the model's tokens (observations left out)
  std::optional<int64_t> env_tokens;
  std::optional<double> gen_tokens_per_s;
  std::optional<int64_t> train_tokens;
  std::optional<double> train_tokens_per_s;
  std::optional<ParityRecord> parity;
  std::optional<StepTimes> time;
  std::optional<AgeCounts> staleness;
  std::optional<EpisodeCounts> episodes;
  // Where the time went: the trainer waits for rollouts, generators wait with no call in flight.
  std::optional<double> idle_fraction_trainer;
  std::optional<double> idle_fraction_generator;
  std::optional<int64_t> sync_bytes;
  std::optional<double> swap_pause_ms;
  std::optional<double> sync_trainer_s;  // the trainer's part of time.sync
  // The batch's prompts (prompt_ledger.h): trained, every group dropped by the advantage
  // policy, every item failed; and generation calls made again this step (their generator died).
  std::optional<int64_t> prompts_trained;
  std::optional<int64_t> prompts_dropped_by_policy;
  std::optional<int64_t> prompts_failed;
  std::optional<int64_t> prompts_resubmitted;
  std::optional<int64_t> generator_restarts;  // this step
  std::optional<std::vector<RestartRecord>> restarts;  // every service restarted, with its cause
  std::optional<std::vector<FirstSampleRecord>> first_samples;  // of restarted generators
  // Background checkpoints seen by this step's train call: how long the checkpoint taken
  // before it held the trainer, and the duration of a write that finished before it.
  std::optional<double> checkpoint_blocking_ms;
  std::optional<double> checkpoint_write_ms;
  std::optional<MoeRecord> moe;  // mixture-of-experts models only
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    StepRecord, step, weight_version, reward_mean, accuracy, loss, grad_norm, lr, entropy,
    ratio_mean, clipped_fraction, samples, reward_items_sent, reward_items_scored,
    reward_items_failed, groups_dropped, rollouts_trained, rollout_model_tokens,
    rollout_environment_tokens, gen_tokens, env_tokens, gen_tokens_per_s, train_tokens,
    train_tokens_per_s, parity, time, staleness, episodes, idle_fraction_trainer,
    idle_fraction_generator, sync_bytes, swap_pause_ms, sync_trainer_s, prompts_trained,
    prompts_dropped_by_policy, prompts_failed, prompts_resubmitted, generator_restarts, restarts,
    first_samples, checkpoint_blocking_ms, checkpoint_write_ms, moe)

// The figures folded over step records that summary.json reports as they are: RlTotals folds
// them and JobSummary (job_summary.h) holds them, both by deriving from this struct.
struct SummaryTotals {
  int64_t parity_tokens_compared = 0;
  int64_t parity_tokens_mismatched = 0;
  double parity_max_abs_diff = 0;  // the largest of any step (not a sum)
  int64_t reward_items_sent = 0;
  int64_t reward_items_scored = 0;
  int64_t reward_items_failed = 0;
  int64_t samples_trained = 0;
  int64_t model_tokens_trained = 0;        // loss-mask tokens sent to the trainer
  int64_t environment_tokens_trained = 0;  // masked-out observation tokens sent to the trainer
  // Mixture-of-experts jobs only: routing agreement with the generator (MoeRecord).
  std::optional<int64_t> routing_tokens_compared;
  std::optional<int64_t> routing_tokens_disagreeing;
};

// Figures accumulated over step records.
struct RlTotals : SummaryTotals {
  int64_t steps = 0;
  EpisodeCounts episodes;
  AgeHistogram ages;

  // Adds one step's figures (its unset members count as 0).
  void Add(const StepRecord& record);
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_STEP_RECORD_H_
