// summary.json: the typed summary of a job, which the job fills at its end (job.h), prints as a
// short table, and the report shows (report.h). The struct is the schema: the JSON keys are the
// member names.
//
// A job may take several runs of `lockstep run` (the first, then each --resume). The totals
// cover the whole job: they are folded (RlTotals) over every step record in metrics.jsonl,
// which a resume first truncates to the checkpoint it continues from. `runs` counts the runs;
// the `_this_run` members, `wall_s` and `rewards` (the reward components' own counters) are of
// the last run only.
#ifndef LOCKSTEP_ORCHESTRATOR_JOB_SUMMARY_H_
#define LOCKSTEP_ORCHESTRATOR_JOB_SUMMARY_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"
#include "orchestrator/json_optional.h"
#include "orchestrator/prompt_ledger.h"
#include "orchestrator/step_record.h"

namespace lockstep::orchestrator {

// Held-out accuracy (evaluation.h): greedy, every eval prompt once.
struct EvalResult {
  int64_t num_prompts = 0;
  int64_t num_correct = 0;
  int64_t num_failed = 0;  // reward items that could not be scored
  double accuracy = 0;     // num_correct / num_prompts
  double reward_mean = 0;  // over scored items
  double seconds = 0;
  // "0.250 (50/200)": the accuracy with its counts.
  std::string accuracy_text() const;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EvalResult, accuracy, num_prompts, num_correct,
                                                num_failed, reward_mean, seconds)

// Trainer rollbacks of a run (a dead trainer restarted from its last checkpoint): the RL steps
// done after that checkpoint are done again, so the rollouts they trained on were discarded
// (the steps that run again generate their own), and so were the prompts in flight at the
// death (issued again from the checkpoint's data cursor).
struct RollbackCounts {
  int64_t rollbacks = 0;
  int64_t steps_discarded = 0;
  int64_t rollouts_discarded = 0;         // trained on in a discarded step
  int64_t prompts_in_flight_discarded = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RollbackCounts, rollbacks, steps_discarded,
                                                rollouts_discarded, prompts_in_flight_discarded)

// The SummaryTotals members (parity_tokens_compared, …) are the job's: SetTotals fills them.
struct JobSummary : SummaryTotals {
  std::string name;
  int64_t runs = 1;      // runs of `lockstep run` this job took (1 + resumes)
  bool resumed = false;  // the last run was a resume
  double accuracy_before = 0;
  double accuracy_after = 0;
  // The held-out eval: false when the job has none (data.eval_size = 0, no eval set, or a
  // multi-turn job); eval_before and eval_after are then empty.
  bool held_out_eval = false;
  EvalResult eval_before;       // before RL: the first run's, kept in eval_before.json
  int64_t eval_before_run = 0;  // the run that measured it (0: none did, e.g. a lost file)
  EvalResult eval_after;        // after the last run's last step (rl_steps)
  int64_t rl_steps = 0;  // RL steps done, all runs
  int64_t rl_steps_this_run = 0;
  std::optional<EpisodeCounts> episodes;  // multi-turn jobs only
  AgeCounts staleness;                    // samples per policy age
  int64_t max_staleness = 0;
  nlohmann::json rewards;  // per reward component (JobRewards::SummaryJson), last run
  double wall_s = 0;       // last run
  // Fault tolerance, last run: restarts per service ("generator1": 1) and their sum; the
  // prompt ledger (prompt_ledger.h: issued = trained + dropped_by_policy + failed + in_flight).
  std::map<std::string, int64_t> restarts;
  int64_t restarts_total = 0;
  std::optional<PromptLedger> prompts;
  std::optional<RollbackCounts> trainer_rollbacks;  // only when the trainer was restarted
};
// One flat JSON object: the SummaryTotals members are listed among the others.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobSummary, name, runs, resumed, accuracy_before,
                                                accuracy_after, held_out_eval, eval_before,
                                                eval_before_run, eval_after, rl_steps,
                                                rl_steps_this_run, parity_tokens_compared,
                                                parity_tokens_mismatched, parity_max_abs_diff,
                                                samples_trained, reward_items_sent,
                                                reward_items_scored, reward_items_failed,
                                                model_tokens_trained, environment_tokens_trained,
                                                routing_tokens_compared,
                                                routing_tokens_disagreeing, episodes, staleness,
                                                max_staleness, rewards, wall_s, restarts,
                                                restarts_total, prompts, trainer_rollbacks)

// The job totals of `totals` (folded over every step of the job) copied into `summary`: its
// SummaryTotals members and its staleness.
void SetTotals(const RlTotals& totals, JobSummary& summary);

// summary.json's text: pretty-printed, unset members left out, newline-terminated.
std::string SummaryText(const JobSummary& summary);

// The short table `lockstep run` prints at the end (`run_dir` names the run).
void PrintSummaryTable(const JobSummary& summary, const std::string& run_dir, FILE* out);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_JOB_SUMMARY_H_
