// Writes the rollouts of a train step whose trainer and generator log-probs were not
// bit-identical under runs/<name>/mismatches/ (diagnose/mismatch_record.h), for
// `lockstep diagnose runs/<name>` to replay, and names the folder where the trainer saves the
// weights those rollouts were scored with (TrainStepRequest.mismatch_weights_dir).
//
// Bounded: at most `max_records` rollouts per step, and only the first `max_steps` steps that
// mismatch write anything (each such step's weights are a full copy of the model).
//
// Thread safety: none; the RL loop's thread only.
#ifndef LOCKSTEP_ORCHESTRATOR_MISMATCH_RECORDER_H_
#define LOCKSTEP_ORCHESTRATOR_MISMATCH_RECORDER_H_

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "proto/trainer.grpc.pb.h"

namespace lockstep::orchestrator {

struct MismatchRecorderOptions {
  std::filesystem::path run_dir;
  int64_t max_records = 4;  // rollouts recorded per step
  int64_t max_steps = 3;    // steps that record
  // What a replay needs to know about the services.
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  std::string generator_mode = "batch_invariant";
  int generator_threads = 0;
  std::string trainer_mode = "batch_invariant";
  int trainer_threads = 0;
};

class MismatchRecorder {
 public:
  explicit MismatchRecorder(MismatchRecorderOptions options) : options_(std::move(options)) {}

  // The folder for the weights of `weight_version`, or "" once max_steps steps have recorded.
  std::string WeightsDirFor(int64_t weight_version) const;

  // After a train step that scored `request` at `weight_version` (the trainer's version before
  // the step): writes the records of the rollouts `parity.mismatched_rollouts` names, if any
  // and if the budget allows. `step` is the RL step (1-based, as in metrics.jsonl). Errors:
  // Internal when the file cannot be written.
  absl::Status Record(int64_t step, int64_t weight_version, const v1::TrainStepRequest& request,
                      const v1::ParityStats& parity);

  int64_t steps_recorded() const { return steps_recorded_; }

 private:
  MismatchRecorderOptions options_;
  int64_t steps_recorded_ = 0;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_MISMATCH_RECORDER_H_
