// The trainer: owns the fp32 master weights (a Transformer) and the AdamW state, and runs one
// optimizer step per call.
//
//   TrainStep(rollouts) = validate → pack into micro-batches by tokens → per micro-batch:
//     training forward → target log-probs (+ entropy, parity) → policy loss → backward
//     → all-reduce gradients (data parallel) → clip → AdamW → weight_version += 1.
//
// The loss is normalised by the GLOBAL number of loss tokens (or sequences) of the step, across
// micro-batches and ranks, so the update does not depend on how the batch is split.
//
// Parity: for completion tokens sampled under the trainer's current weights (weight version equal
// to the trainer's version before the step, policy age 0) with loss mask 1, the trainer's
// log-probs from the loss forward are compared bit for bit with the generator's.
//
// Errors: bad input fails with InvalidArgument naming the rollout index and the problem, before
// any state changes (weights, optimizer, step and version stay as they were).
//
// Thread safety: not synchronised; one thread at a time (the service serialises calls).
#ifndef LOCKSTEP_TRAINER_TRAINER_H_
#define LOCKSTEP_TRAINER_TRAINER_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "trainer/moe_step.h"
#include "trainer/trainer_options.h"

namespace lockstep::trainer {

class AdamW;
class CheckpointWriter;
struct CheckpointPayload;

// A scored rollout; mirrors proto lockstep.v1.Rollout.
struct Rollout {
  std::vector<int64_t> prompt_tokens;
  std::vector<int64_t> completion_tokens;
  std::vector<float> behaviour_logprobs;  // one per completion token; non-finite: token masked
  std::vector<int64_t> weight_versions;   // one per completion token
  std::vector<uint8_t> loss_mask;         // empty = all 1; 0 = environment token (no loss/parity)
  double advantage = 0;
  int64_t group_id = 0;
  // Mixture-of-experts models: the generator's routing of each completion token's row,
  // [token][sparse layer][k]; empty = not compared (MoeStepStats' routing agreement).
  std::vector<int32_t> routed_experts;
};

// Supervised example: cross-entropy on the completion tokens given the prompt.
struct SftExample {
  std::vector<int64_t> prompt_tokens;
  std::vector<int64_t> completion_tokens;
};

struct ParityStats {
  int64_t tokens_compared = 0;
  int64_t tokens_mismatched = 0;  // not bit-identical
  double max_abs_diff = 0;        // over finite pairs
  double mean_diff = 0;           // mean (trainer - generator) over finite pairs
  double k3 = 0;                  // mean exp(d) - 1 - d, d = trainer - generator: KL(gen || trainer)
  bool has_mismatch = false;      // the first mismatch, in rollout order:
  int64_t mismatch_rollout = 0;   //   index into the batch
  int64_t mismatch_position = 0;  //   index into its completion tokens
  float mismatch_trainer_logprob = 0;
  float mismatch_generator_logprob = 0;
  std::vector<int64_t> mismatched_rollouts;  // batch indices with a mismatched token, ascending
};

struct StepMetrics {
  int64_t step = 0;            // optimizer steps done, after this one
  int64_t weight_version = 0;  // after this step
  double loss = 0;             // summed over ranks
  double grad_norm = 0;        // global, before clipping
  double lr = 0;
  double entropy = 0;           // mean per loss token (this rank)
  double ratio_mean = 0;        // mean pi/pi_behaviour over loss tokens (this rank)
  double ratio_min = 0;         // extremes of the same ratio (1.0 and 1.0 on-policy in
  double ratio_max = 0;         //   batch-invariant mode)
  double clipped_fraction = 0;  // fraction of loss tokens whose clipped branch was taken
  int64_t tokens = 0;           // loss tokens (this rank)
  int64_t sequences = 0;        // rollouts or examples (this rank)
  double kl = 0;                // mean k3 to the reference per loss token, when kl_coef > 0
  ParityStats parity;
  std::optional<MoeStepStats> moe;  // mixture-of-experts models: aux losses and expert load
  double seconds = 0;
  int64_t micro_batches = 0;
  // Background checkpoints (checkpoint_writer.h) since the previous step: how long the last
  // SaveCheckpoint held the trainer, and a write that finished (its whole duration).
  std::optional<double> checkpoint_blocking_ms;
  std::optional<double> checkpoint_write_ms;
};

// The figures of the last SaveCheckpoint.
struct CheckpointTimes {
  double blocking_ms = 0;             // the call's wait for an earlier write + the state's copy
  double copy_ms = 0;                 // the copy alone
  std::optional<double> write_ms;     // set when the call waited for its write
  int64_t allocated_bytes = 0;        // snapshot memory the call allocated (0: reserved by Create)
};

// Data-parallel hook: implemented over c10d by trainer/data_parallel; null means a single rank.
// Every rank calls the same sequence of methods with the same shapes in each step:
// TrainStep/SftStep call AllReduceScalar twice (loss-token count, sequence count), then
// AllReduceSum once after the micro-batches, then AllReduceScalar once (the loss).
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Sums `grads` (in place) across ranks; called once per optimizer step after all
  // micro-batches. The tensors are the gradients of every parameter, in the model's
  // parameters() (registration) order, the same on every rank; none is undefined.
  virtual absl::Status AllReduceSum(std::vector<torch::Tensor>& grads) = 0;
  // Sum of a scalar across ranks (global loss-token count for normalisation).
  virtual absl::StatusOr<double> AllReduceScalar(double value) = 0;
};

class Trainer {
 public:
  // Takes shared ownership of `model` (float32 parameters; its numeric mode must equal
  // options.mode). `reducer` (not owned, may be null) must outlive the trainer. When
  // options.kl_coef > 0 a frozen copy of the current weights is kept as the KL reference.
  // Errors: InvalidArgument for invalid options or a model that does not match them.
  // Side effect: installs the caching CPU allocator for the process (caching_cpu_allocator.h).
  // With options.checkpoint_dir set, starts the checkpoint writer and reserves its snapshot
  // buffers (one more copy of weights + AdamW state in memory, its pages touched on the writer
  // thread), so that no save, the first included, allocates or faults in memory.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(std::shared_ptr<Transformer> model,
                                                         TrainerOptions options,
                                                         GradientReducer* reducer = nullptr);
  ~Trainer();

  // One policy-gradient step on scored rollouts; the weight version then increases by one.
  // InvalidArgument (state untouched), naming the rollout index: empty batch, empty completion,
  // length mismatch of log-probs/versions/mask, sequence over max_sequence_length, token id
  // outside the vocabulary, non-finite advantage, weight version above the trainer's.
  // When `mismatch_weights_dir` is not empty and parity finds a token that is not
  // bit-identical, the weights the batch was scored with are saved there (Hugging Face layout,
  // written to a temporary folder and renamed) before the update, unless the folder exists.
  absl::StatusOr<StepMetrics> TrainStep(const std::vector<Rollout>& batch,
                                        const std::string& mismatch_weights_dir = "");

  // One cross-entropy step on the completion tokens (token mean); version += 1. Same
  // validation as TrainStep where it applies. Runs at options.sft_lr when that is > 0.
  absl::StatusOr<StepMetrics> SftStep(const std::vector<SftExample>& batch);

  // log p(completion token | prefix) under softmax(logits / temperature), one vector per
  // sequence, without gradients. Same validation as SftStep.
  absl::StatusOr<std::vector<std::vector<float>>> ComputeLogprobs(
      const std::vector<SftExample>& sequences, double temperature = 1.0);

  // Writes a checkpoint for the current step under options.checkpoint_dir (see
  // checkpoint_manager.h) and returns the step directory. `data_cursor` is opaque to the
  // trainer and comes back through data_cursor() after LoadCheckpoint. The state is copied
  // into the buffers reserved by Create and written by a background thread
  // (checkpoint_writer.h; trainer_checkpoint.cc); unless `background`,
  // the call returns once the directory is complete. A call while a write is in flight waits
  // for it first. Errors: FailedPrecondition without checkpoint_dir; the error of this write
  // (not background) or of an earlier background write that failed.
  absl::StatusOr<std::string> SaveCheckpoint(const std::string& data_cursor,
                                             bool background = false);
  // Waits for a background checkpoint write in flight; its error, if it failed.
  absl::Status WaitForCheckpoint();
  const CheckpointTimes& last_checkpoint_times() const { return last_checkpoint_times_; }

  // Restores weights, optimizer state, step, weight version, RNG state and data cursor from a
  // step directory, or from a checkpoint root (its latest valid step). Verifies the manifest
  // first; on any error the trainer is unchanged.
  absl::Status LoadCheckpoint(const std::string& path);

  int64_t step() const { return step_; }
  int64_t weight_version() const { return weight_version_; }
  const std::string& data_cursor() const { return data_cursor_; }
  const std::string& resumed_from() const { return resumed_from_; }
  const TrainerOptions& options() const { return options_; }

  // Hugging Face name -> fp32 master tensor (views of the live parameters, no copies; valid
  // until the trainer is destroyed, updated in place by each step).
  TensorMap Parameters() const;
  // Optimizer state by name (views): "exp_avg.<param>", "exp_avg_sq.<param>", "step".
  TensorMap OptimizerState() const;
  Transformer& model() { return *model_; }

 private:
  Trainer(std::shared_ptr<Transformer> model, TrainerOptions options, GradientReducer* reducer);

  // SaveModel into `dir` through `dir`.tmp and a rename; nothing when `dir` exists.
  absl::Status SaveWeightsOnce(const std::string& dir) const;
  // InvalidArgument "<what> <index>: <problem>" for a sequence the model cannot score.
  absl::Status ValidateSequence(const char* what, size_t index, const std::vector<int64_t>& prompt,
                                const std::vector<int64_t>& completion) const;
  // Applies the summed gradients: all-reduce, clip, AdamW; advances step and version. `sft`:
  // the step runs at options.sft_lr when that is set. Reports checkpoint figures since the
  // previous step.
  absl::Status ApplyGradients(StepMetrics& metrics, bool sft = false);
  // The tensors a checkpoint holds besides the weights (trainer_checkpoint.cc): AdamW's state
  // and the KL reference, the live tensors (the writer pairs them with its buffers once).
  CheckpointPayload CheckpointTensors() const;
  // Creates checkpoint_writer_ and reserves its snapshot buffers (Create, with checkpoint_dir).
  void StartCheckpointWriter();

  std::shared_ptr<Transformer> model_;
  std::shared_ptr<Transformer> reference_;  // frozen initial weights when kl_coef > 0
  TrainerOptions options_;
  GradientReducer* reducer_;
  std::unique_ptr<AdamW> optimizer_;
  at::Generator generator_;  // the trainer's RNG (checkpointed)
  int64_t step_ = 0;
  int64_t weight_version_ = 0;
  std::string data_cursor_;
  std::string resumed_from_;
  // Created by Create when options.checkpoint_dir is set, its snapshot buffers reserved then.
  std::unique_ptr<CheckpointWriter> checkpoint_writer_;
  std::string options_json_;  // TrainerOptionsToJson(options_), for trainer_state.json
  CheckpointTimes last_checkpoint_times_;
  std::optional<double> unreported_blocking_ms_;  // the next step's checkpoint_blocking_ms
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_TRAINER_H_
