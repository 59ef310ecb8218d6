// The trainer's forward for losses: target log-probs of completion tokens (with autograd) and
// their entropies, from one training forward over a packed micro-batch. The log-probs go through
// the same model ops as the generator's (Transformer::Logits + ops::TargetLogProbs), so in
// batch-invariant mode they are bit-identical to the generator's sampled-token log-probs.
// Thread safety: as the model (one forward at a time per model).
#ifndef LOCKSTEP_TRAINER_TOKEN_LOGPROBS_H_
#define LOCKSTEP_TRAINER_TOKEN_LOGPROBS_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/transformer.h"

namespace lockstep::trainer {

// One sequence of a micro-batch: the full token list (prompt + completion) and how many of the
// trailing tokens are completion tokens (scored).
struct ScoredSequence {
  std::vector<int64_t> tokens;
  int64_t num_completion = 0;  // >= 1, <= tokens.size() - 1
};

struct TokenLogprobs {
  torch::Tensor logprobs;           // [C] float32, C = sum of num_completion, packed in order
  torch::Tensor entropy;            // [C] float32, detached (undefined unless asked for)
  std::vector<int64_t> cu_seqlens;  // [S + 1] boundaries of each sequence's completion tokens
};

// log softmax(logits / T)[target] for each completion token, where completion token j of a
// sequence with prompt length P is predicted by the hidden row of position P + j - 1. Gradients
// flow when grad mode is on. With `with_entropy`, also H_t = -sum_v p_v log p_v of the same
// (temperature-scaled) distribution, computed from the same logits chunk without gradients.
// Logits are computed for completion rows only, `model.options().logits_chunk_tokens` rows at a
// time. A non-null `observer` sees every op of the forward and the LM head's rows (the packed
// batch holds the sequences in order, whole). Errors: InvalidArgument from the model for a batch
// it cannot run.
absl::StatusOr<TokenLogprobs> ComputeTokenLogprobs(Transformer& model,
                                                   const std::vector<ScoredSequence>& sequences,
                                                   double temperature, bool with_entropy,
                                                   ForwardObserver* observer = nullptr);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_TOKEN_LOGPROBS_H_
