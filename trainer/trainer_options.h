// Options of the trainer (optimizer, LR schedule, loss, batching, checkpoints) and their JSON
// form. JSON keys are the snake_case field names below; they may sit at the top level or inside
// the section objects "model", "optimizer", "lr_schedule", "loss", "batching", "checkpoint".
// Unknown keys are errors naming the key. Thread safety: plain data and pure functions.
#ifndef LOCKSTEP_TRAINER_TRAINER_OPTIONS_H_
#define LOCKSTEP_TRAINER_TRAINER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::trainer {

enum class LossKind {
  kGrpo,  // token-level clipped surrogate (GRPO / DAPO with clip_eps_high > clip_eps_low)
  kGspo,  // sequence-level ratio (geometric mean of the token ratios), clipped per sequence
};

enum class Aggregation {
  kTokenMean,         // sum over loss tokens / global loss-token count
  kSeqMeanTokenMean,  // mean over sequences of (mean over the sequence's loss tokens)
  kConstant,          // sum over loss tokens / (constant_normalizer * global sequence count)
};

enum class ScheduleKind { kCosine, kConstant };

struct TrainerOptions {
  // model
  NumericMode mode = NumericMode::kFast;  // must match the model handed to Trainer::Create
  int64_t max_sequence_length = 0;        // prompt + completion; 0 = the model's context
  double temperature = 1.0;               // log-probs under softmax(logits / T), as the generator

  // optimizer: AdamW with global-norm clipping
  double lr = 1e-5;
  double beta1 = 0.9;  // JSON: "betas": [beta1, beta2]
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // applied to matrices only (parameters with >= 2 dimensions)
  double grad_clip = 1.0;     // max global L2 norm; 0 = no clipping
  // SftStep's learning rate, constant; 0 = SftStep follows the schedule like TrainStep. Either
  // way an SFT step counts as an optimizer step for the schedule (warm-up and cosine progress).
  double sft_lr = 0.0;

  // lr_schedule
  ScheduleKind schedule = ScheduleKind::kConstant;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine decays over [warmup_steps, total_steps); needed for cosine
  double min_lr_ratio = 0.0;

  // loss
  LossKind loss = LossKind::kGrpo;
  double clip_eps_low = 0.2;
  double clip_eps_high = 0.2;     // > clip_eps_low: DAPO clip-higher
  double log_ratio_clamp = 20.0;  // log pi/pi_b clamped to [-c, c] before exp
  Aggregation aggregation = Aggregation::kTokenMean;
  double constant_normalizer = 1.0;  // for Aggregation::kConstant (e.g. max completion length)
  double tis_cap = 0.0;              // truncated importance sampling cap; 0 = off
  double kl_coef = 0.0;              // k3 KL to the initial weights; 0 = off (no copy kept)
  // Mixture-of-experts models only: the load-balancing loss (HF load_balancing_loss_func) and
  // ST-MoE's router z-loss, over every routed token of the forward; 0 = off (the RL default).
  double moe_aux_loss_coef = 0.0;
  double moe_z_loss_coef = 0.0;

  // batching
  int64_t micro_batch_tokens = 4096;

  // checkpoint
  std::string checkpoint_dir;  // empty: SaveCheckpoint fails
  int64_t keep_last = 3;       // step directories kept (0 = keep all)
  std::string tokenizer_dir;   // tokenizer files copied into each checkpoint when set
  uint64_t seed = 0;

  // OK iff every field is in range; InvalidArgument naming the field otherwise.
  absl::Status Validate() const;
};

// Parses a JSON object (see the header comment) over the defaults, then validates.
absl::StatusOr<TrainerOptions> TrainerOptionsFromJson(absl::string_view json_text);
// The JSON form (flat keys), which TrainerOptionsFromJson reads back to equal options.
std::string TrainerOptionsToJson(const TrainerOptions& options);

absl::string_view LossKindName(LossKind kind);
absl::string_view AggregationName(Aggregation aggregation);
absl::string_view ScheduleKindName(ScheduleKind kind);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_TRAINER_OPTIONS_H_
