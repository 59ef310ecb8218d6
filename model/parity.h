// The parity checker: compares the trainer's and the generator's log-probs of the same tokens bit
// for bit and summarises the difference.
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
  // First differing token in packed order, as (sequence index, position within the sequence).
  std::optional<std::pair<int64_t, int64_t>> first_difference;
  double max_abs_diff = 0;   // max |candidate - reference|
  double mean_diff = 0;      // mean (candidate - reference), signed
  double mean_abs_diff = 0;  // mean |candidate - reference|
  // k3 estimate of KL(candidate || reference) from tokens sampled by the candidate (generator):
  //   r = reference - candidate (log p_ref / p_cand);  k3 = mean(exp(r) - 1 - r)  (>= 0)
  double k3_kl = 0;

  bool bit_identical() const { return tokens_differing == 0; }
  std::string ToString() const;
};

// reference (the trainer's log-probs) and candidate (the generator's): float32 vectors of equal
// length, packed by `cu_seqlens` ([num_sequences + 1], starting at 0, ending at the length).
// Errors: InvalidArgument on mismatched shapes, dtypes or boundaries.
absl::StatusOr<ParityReport> CompareLogProbs(const torch::Tensor& reference,
                                             const torch::Tensor& candidate,
                                             const std::vector<int64_t>& cu_seqlens);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_PARITY_H_
