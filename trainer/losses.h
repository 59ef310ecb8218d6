// Policy-gradient and supervised losses over the tokens of one micro-batch, as tensors.
//
// Every loss is a weighted SUM over tokens, sum_t w_t * l_t, where the weights w_t
// (AggregationWeights) already divide by the step's GLOBAL token or sequence count: summing the
// micro-batch losses of every rank gives the loss of the whole batch, however it was split.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_TRAINER_LOSSES_H_
#define LOCKSTEP_TRAINER_LOSSES_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/trainer_options.h"

namespace lockstep::trainer {

// Per-token weights [T] float32 (0 where mask is false) that turn a token sum into the chosen
// aggregate. `mask` [T] bool marks loss tokens; `cu_seqlens` [S + 1] splits the T tokens into
// sequences. `global_tokens` and `global_sequences` count loss tokens and sequences with at least
// one loss token over the whole step (all micro-batches, all ranks); both must be > 0 when used.
//   token_mean:           w_t = 1 / global_tokens
//   seq_mean_token_mean:  w_t = 1 / (n_s * global_sequences),  n_s = loss tokens of t's sequence
//   constant:             w_t = 1 / (constant_normalizer * global_sequences)   (Dr. GRPO)
torch::Tensor AggregationWeights(Aggregation aggregation, const torch::Tensor& mask,
                                 const std::vector<int64_t>& cu_seqlens, double global_tokens,
                                 double global_sequences, double constant_normalizer);

struct PolicyLossOptions {
  LossKind kind = LossKind::kGrpo;
  double clip_eps_low = 0.2;
  double clip_eps_high = 0.2;
  double log_ratio_clamp = 20.0;
  double tis_cap = 0.0;  // 0 = off
  double kl_coef = 0.0;  // 0 = off

  static PolicyLossOptions From(const TrainerOptions& options);
};

struct PolicyLossInput {
  torch::Tensor logprobs;            // [T] float32 trainer log-probs (carries autograd)
  torch::Tensor behaviour_logprobs;  // [T] float32 generator log-probs (any value where masked)
  torch::Tensor advantages;          // [T] float32, the sequence's advantage on each token
  torch::Tensor mask;                // [T] bool, loss tokens
  torch::Tensor weights;             // [T] float32, from AggregationWeights
  std::vector<int64_t> cu_seqlens;   // [S + 1] sequence boundaries (GSPO)
  torch::Tensor reference_logprobs;  // [T] float32 or undefined; needed when kl_coef > 0
};

struct PolicyLossResult {
  torch::Tensor loss;     // scalar: sum_t w_t * l_t (differentiable)
  torch::Tensor ratio;    // [T] detached: exp(clamp(logp - logp_b)), the token ratio
  torch::Tensor clipped;  // [T] bool: the clipped branch of the surrogate was taken
  torch::Tensor kl;       // [T] detached k3 per token (zeros when kl_coef == 0)
};

// The policy loss. With d_t = clamp(logp_t - logp_b_t, -c, c) (c = log_ratio_clamp):
//   GRPO/DAPO  r_t = exp(d_t)
//   GSPO       r_t = exp(mean_{u in seq(t), mask} d_u)   (geometric mean of the token ratios)
//   l_t = -min(r_t * A_t, clip(r_t, 1 - eps_low, 1 + eps_high) * A_t)
// Truncated importance sampling (tis_cap > 0): the surrogate's ratio is taken against the
// trainer's own detached log-probs (d_t = logp_t - sg(logp_t): value 1, gradient of logp), and
// the stale-sample correction is the detached weight min(exp(clamp(sg(logp_t) - logp_b_t)), cap):
//   l_t = -min(r_t A_t, clip(r_t) A_t) * min(pi/pi_b, cap)
// KL (kl_coef > 0), k3 estimator to the reference with e_t = clamp(logp_ref_t - logp_t):
//   l_t += kl_coef * (exp(e_t) - 1 - e_t)
// Masked tokens contribute nothing (their inputs are replaced before any arithmetic, so a
// non-finite behaviour log-prob cannot reach the gradient).
PolicyLossResult PolicyLoss(const PolicyLossInput& input, const PolicyLossOptions& options);

// Supervised cross-entropy: sum_t w_t * (-logp_t) over tokens with weight w_t.
torch::Tensor SftLoss(const torch::Tensor& logprobs, const torch::Tensor& weights);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_LOSSES_H_
