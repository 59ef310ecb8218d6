// The RL loop: one Step() per optimizer step, reading like an inference engine's step():
//
//   AdmitPrompts()        prompts from the dataset → Generator.Generate (n samples, streaming,
//                         spread over the generators) → rewards, all in the background, as far
//                         ahead as the staleness bound allows (staleness.h)
//   queue_.WaitForOldest  wait for the oldest prompts_per_step prompts, generated and scored
//   BuildTrainBatch()     group advantages (failed reward items left out and counted), age check
//   Trainer.TrainStep     → metrics, parity for age-0 samples (strict: stop on a mismatch)
//   SyncWeights()         trainer → every generator, version + 1
//   → the step's record (step_record.h)
//
// With max_staleness = 0 generation, training and sync strictly alternate (on-policy); with
// S > 0 generation of the next S steps' prompts overlaps training.
//
// Thread safety: Run/Step and the accessors run on one thread (the loop thread). Callbacks of
// in-flight calls touch only the shared RolloutQueue.
#ifndef LOCKSTEP_ORCHESTRATOR_RL_LOOP_H_
#define LOCKSTEP_ORCHESTRATOR_RL_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/dataset_iterator.h"
#include "data/prompt_format.h"
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/environment_rollouts.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/generator_recovery.h"
#include "orchestrator/mismatch_recorder.h"
#include "orchestrator/prompt_ledger.h"
#include "orchestrator/rollout_queue.h"
#include "orchestrator/staleness.h"
#include "orchestrator/step_record.h"
#include "orchestrator/trainer_client.h"
#include "orchestrator/weight_sync_driver.h"
#include "rewards/reward_scorer.h"
#include "trainer/advantages.h"

namespace lockstep::orchestrator {

struct RlLoopOptions {
  int64_t steps = 100;  // RL steps in the job (the loop runs start_step..steps-1)
  int64_t prompts_per_step = 8;
  int64_t samples_per_prompt = 8;
  int64_t max_staleness = 0;
  v1::SamplingParams sampling;  // temperature, top-p/k, max_tokens, stop tokens
  PromptFormat prompt_format;   // how a dataset row becomes the prompt text (chat template)
  trainer::AdvantageOptions advantages;
  std::string parity = "strict";  // "strict" | "report" | "off"
  int64_t checkpoint_every = 0;   // RL steps between checkpoints; 0 = none inside the loop
  uint64_t seed = 0;              // sampling seeds derive from it and the prompt number
  absl::Duration generate_timeout = absl::Minutes(10);
  absl::Duration train_timeout = absl::Minutes(10);
  absl::Duration sync_timeout = absl::Minutes(2);
  std::string investigate_hint;  // appended to a strict parity failure (a command to run)
  // Where rollouts whose log-probs mismatch are recorded for `lockstep diagnose` (with the
  // weights they were scored with); none when max_records is 0 or parity is "off".
  MismatchRecorderOptions mismatch_records;
};

// What the loop talks to. Not owned; all must outlive the loop.
//
// Without `environment`, each prompt's n samples come from one Generate call and `scorer` (which
// is then required) scores them. With `environment`, each sample is a multi-turn episode whose
// return is its reward; `scorer`, when given, also scores the episode's transcript and its
// reward is added (an item fails when either fails).
struct RlServices {
  TrainerClient* trainer = nullptr;
  std::vector<GeneratorClient*> generators;
  rewards::RewardScorer* scorer = nullptr;
  const Tokenizer* tokenizer = nullptr;
  EnvironmentRollouts* environment = nullptr;
  // Optional: a dead generator is restarted and its prompts in flight are generated again
  // (rl_loop_recovery.cc); without it a failed generation call stops the loop. Single-turn
  // jobs only: with `environment` a failed episode still stops the loop.
  GeneratorRecovery* recovery = nullptr;
};

class RlLoop {
 public:
  // `dataset` must outlive the loop. `cursor` is where the job's prompt stream continues (the
  // data cursor from a checkpoint, or a fresh one); `start_step` the RL steps already done.
  RlLoop(RlLoopOptions options, RlServices services, const Dataset* dataset,
         DatasetIterator iterator, int64_t start_step);
  ~RlLoop();

  // Called after each step with its record (a line of metrics.jsonl).
  using StepCallback = std::function<void(const StepRecord&)>;
  // Called to checkpoint: (rl steps done, data cursor JSON) → OK or error.
  using CheckpointFn = std::function<absl::Status(int64_t, const std::string&)>;

  // Runs the remaining steps. Stops between steps once `stop` returns true: returns Cancelled
  // (the caller checkpoints with data_cursor()). Every error stops the loop; in-flight
  // generation is abandoned.
  absl::Status Run(const StepCallback& on_step, const CheckpointFn& checkpoint,
                   const std::function<bool()>& stop);

  // One RL step (admission, batch, train, sync). Returns its record.
  absl::StatusOr<StepRecord> Step(const std::function<bool()>& stop);

  // The data cursor to checkpoint now: the dataset position of the oldest prompt not yet
  // trained, plus the RL steps done. JSON text.
  std::string DataCursor() const;
  int64_t steps_done() const { return step_; }
  // The records of the steps this loop ran, folded (RlTotals::Add).
  const RlTotals& totals() const { return totals_; }
  // This loop's prompts, accounted for (in_flight: queued now).
  PromptLedger ledger() const;

  // Parses DataCursor() output: (dataset cursor, rl steps done).
  static absl::StatusOr<std::pair<DatasetCursor, int64_t>> ParseDataCursor(const std::string& text);

 private:
  void AdmitPrompts();
  absl::Status SubmitPrompt();
  // Starts (or starts again) the Generate call of a queued prompt on its generator.
  void StartGeneration(const std::shared_ptr<PromptInFlight>& prompt);
  // Recovery (rl_loop_recovery.cc), on the loop thread. TendGenerators: the dead are restarted
  // in the background (StartRestarts), their failed calls shared (ShareLostPrompts), restarts
  // polled, waiting prompts handed to idle generators (GiveWaitingToIdle); a failed call of a
  // live generator is the loop's error. FinishRestarts: restarts `dead` and those in progress,
  // blocking, and syncs `version` to every generator (the step's sync when a generator is still
  // restarting at its end). RecoverSync: a sync that failed because a generator died is done
  // again with the restarted one; otherwise `failed` is returned.
  absl::Status TendGenerators();
  absl::StatusOr<SyncFigures> FinishRestarts(const std::vector<GeneratorDeath>& dead,
                                             int64_t version);
  absl::StatusOr<SyncFigures> RecoverSync(absl::Status failed, int64_t version);
  // GeneratorRecovery::StartRestarts, counting the restarts and awaiting each new process's
  // first samples (TakeFirstSamples).
  absl::Status StartRestarts(const std::vector<GeneratorDeath>& dead);
  // Prompts lost with restarting generators: the live generators' share (live / (live +
  // restarting), oldest first) is generated again at once, the rest wait in waiting_.
  void ShareLostPrompts(const std::vector<std::shared_ptr<PromptInFlight>>& lost);
  // Waiting prompts go to the generators that hold the weights and have no call in flight (a
  // restarted one once back, or a live one done with its calls), round robin, those in `back`
  // (just restarted) first.
  void GiveWaitingToIdle(const std::vector<GeneratorDeath>& back);
  void Resubmit(const std::shared_ptr<PromptInFlight>& prompt, int64_t generator);
  // The restarted generators whose new process has returned samples since the last call
  // (step_record.h FirstSampleRecord); they are no longer awaited.
  std::vector<FirstSampleRecord> TakeFirstSamples();
  // The multi-turn form of a submitted prompt's generation and scoring (services_.environment).
  void SubmitEpisodes(const std::shared_ptr<PromptInFlight>& prompt);
  // The rollouts of the batch with their advantages; counts failed items and ages.
  absl::StatusOr<v1::TrainStepRequest> BuildTrainBatch(
      const std::vector<std::shared_ptr<PromptInFlight>>& batch, int64_t trainer_version,
      StepRecord* record);
  absl::Status CheckParity(const v1::TrainStepRequest& request, const v1::StepMetrics& metrics);
  // The command a strict parity stop suggests: `lockstep diagnose <run dir>` once records exist.
  std::string InvestigateHint() const;

  RlLoopOptions options_;
  RlServices services_;
  const Dataset* dataset_;
  DatasetIterator iterator_;
  std::deque<DatasetCursor> cursors_in_flight_;  // cursor before each queued prompt
  AdmissionControl admission_;
  std::shared_ptr<RolloutQueue> queue_;
  int64_t step_;                  // RL steps done
  int64_t next_prompt_index_;     // prompt number of the next admission (since the job start)
  int64_t trainer_version_ = -1;  // the trainer's weight version, -1 until first read
  RlTotals totals_;
  EnvironmentTotals episodes_before_;  // the environment's totals at the end of the last step
  int64_t next_generator_ = 0;         // round robin
  std::unique_ptr<MismatchRecorder> mismatch_recorder_;  // null: nothing recorded
  PromptLedger ledger_;                // in_flight filled by ledger()
  int64_t step_resubmitted_ = 0;       // this step's resubmissions and restarts
  int64_t step_restarts_ = 0;
  int64_t next_live_ = 0;  // round robin of resubmissions over live generators
  // Queued prompts lost with a dead generator, not yet given to another (GiveWaitingToIdle).
  std::vector<std::shared_ptr<PromptInFlight>> waiting_;
  // Restarted generators whose new process (incarnation) has not returned samples yet.
  struct AwaitedFirstSamples {
    int64_t generator = 0;
    std::string name;
    absl::Time death;
    int64_t incarnation = 0;
  };
  std::vector<AwaitedFirstSamples> awaited_first_samples_;
  std::function<absl::Status()> tend_;  // TendGenerators, or null without recovery
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_RL_LOOP_H_
