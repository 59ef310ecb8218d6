// The mixture-of-experts part of a training step (issue 24): the auxiliary losses of each
// micro-batch's forward and the step's expert load. Dense models have none of it.
//
//   MoeStep moe(model.config(), options, rows_this_rank, rows_all_ranks);
//   logprobs = ComputeTokenLogprobs(model, sequences, T, true, moe.observer());
//   loss = policy_loss + moe.MicroBatchLoss(rows_of_this_micro_batch);   // then backward
//   ...
//   metrics.moe = moe.Finish();
//
// Each micro-batch's auxiliary term is its loss over its own rows, weighted by its share of the
// step's rows on all ranks: the step's gradient (summed over micro-batches and ranks) is that of
// the row-weighted mean of the micro-batches' losses. The z-loss is a mean over rows, so that is
// the whole batch's; the load-balancing loss (a product of two means) is not additive, so it is
// per micro-batch, as with gradient accumulation in Hugging Face's trainer.
#ifndef LOCKSTEP_TRAINER_MOE_STEP_H_
#define LOCKSTEP_TRAINER_MOE_STEP_H_

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "model/config.h"
#include "model/routing_recorder.h"
#include "trainer/trainer_options.h"

namespace lockstep::trainer {

struct MoeStepStats {
  double aux_loss = 0;  // load-balancing loss, row-weighted mean over the micro-batches (unscaled)
  double z_loss = 0;    // router z-loss, the same
  std::vector<int64_t> sparse_layers;             // ascending
  std::vector<std::vector<int64_t>> expert_load;  // [sparse layer][expert]: tokens routed (x k)
  double load_imbalance_max = 0;  // max over layers of max_e load / mean_e load (1 = balanced)
  // Routing agreement with the generator over the policy-age-0 tokens it reported routing for:
  // a token agrees when every sparse layer chose the same experts in the same rank order.
  // Batch-invariant mode's claim is routing_tokens_disagreeing == 0.
  int64_t routing_tokens_compared = 0;
  int64_t routing_tokens_disagreeing = 0;
  int64_t first_disagreement_rollout = -1;  // batch index, -1 = none
  int64_t first_disagreement_position = -1;  // index into its completion tokens
  int64_t first_disagreement_layer = -1;     // the first sparse layer that differs there
};

// Expert ids a mixture-of-experts model routes per token: sparse layers x k (0 for dense).
int64_t RoutedPerToken(const ModelConfig& config);

class MoeStep {
 public:
  // `local_rows`: rows (prompt + completion tokens) of this rank's batch; `global_rows`: of all
  // ranks (the same as local_rows on one rank).
  MoeStep(const ModelConfig& config, const TrainerOptions& options, double local_rows,
          double global_rows);

  bool sparse() const { return sparse_; }
  // The observer for the next micro-batch's forward (what the last one recorded is dropped);
  // null for a dense model.
  ForwardObserver* observer() {
    recorder_.Clear();
    return sparse_ ? &recorder_ : nullptr;
  }
  // After that forward: records the routing and returns the term to add to the micro-batch's
  // loss (a zero scalar when both coefficients are 0 or the model is dense).
  torch::Tensor MicroBatchLoss(int64_t rows);
  // After that forward: the generator's routing of completion token `position` of rollout
  // `rollout` (`generator`: RoutedPerToken ids) against this forward's packed row `row`.
  void CompareRouting(int64_t rollout, int64_t position, int64_t row, const int32_t* generator);
  // The step's figures; nullopt for a dense model.
  std::optional<MoeStepStats> Finish() const;

 private:
  bool sparse_ = false;
  int64_t num_experts_ = 0, top_k_ = 0;
  double aux_coef_ = 0, z_coef_ = 0;
  double local_rows_ = 0, global_rows_ = 0;
  RoutingRecorder recorder_;
  double aux_sum_ = 0, z_sum_ = 0;  // row-weighted
  MoeStepStats routing_;           // the routing agreement figures only
  std::vector<int64_t> layers_;
  std::vector<torch::Tensor> load_;  // per sparse layer, int64 [num_experts], summed
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_MOE_STEP_H_
