// The parity checker: compares the trainer's and the generator's log-probs of the same tokens bit
// for bit and summarises the difference. The one implementation: the trainer's TrainStep, the
// parity tests and `lockstep diagnose` all use it.
//
// Convention: Δ = trainer − generator. The tokens were sampled by the generator, so with
// r = log p_trainer − log p_generator the k3 estimator mean(exp(r) − 1 − r) (≥ 0, unbiased)
// estimates KL(generator ‖ trainer), the quantity peers report as mismatch KL.
#ifndef LOCKSTEP_MODEL_PARITY_H_
#define LOCKSTEP_MODEL_PARITY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"

namespace lockstep {

struct ParityReport {
  int64_t tokens_compared = 0;
  int64_t tokens_differing = 0;  // not bit-identical (NaN equals NaN only with the same bits)
  // First differing token in the order compared, as (sequence index, position within the
  // sequence), and its two log-probs.
  std::optional<std::pair<int64_t, int64_t>> first_difference;
  float first_trainer_logprob = 0;
  float first_generator_logprob = 0;
  std::vector<int64_t> differing_sequences;  // sequences with a differing token, ascending
  // Over the pairs where both log-probs are finite:
  double max_abs_diff = 0;   // max |Δ|
  double mean_diff = 0;      // mean Δ, signed
  double mean_abs_diff = 0;  // mean |Δ|
  double k3_kl = 0;          // mean(exp(Δ) − 1 − Δ): KL(generator ‖ trainer)

  bool bit_identical() const { return tokens_differing == 0; }
  std::string ToString() const;
};

// Adds up one comparison token by token, for callers that visit the tokens in their own order
// (the trainer, inside its micro-batches). Thread safety: none.
class ParityAccumulator {
 public:
  void Add(int64_t sequence, int64_t position, float trainer, float generator);
  ParityReport Finish() const;

 private:
  ParityReport report_;
  double sum_diff_ = 0, sum_abs_ = 0, sum_k3_ = 0;
  int64_t finite_ = 0;
};

// trainer and generator: float32 vectors of equal length, packed by `cu_seqlens`
// ([num_sequences + 1], starting at 0, ending at the length). Errors: InvalidArgument on
// mismatched shapes, dtypes or boundaries.
absl::StatusOr<ParityReport> CompareLogProbs(const torch::Tensor& trainer,
                                             const torch::Tensor& generator,
                                             const std::vector<int64_t>& cu_seqlens);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_PARITY_H_
