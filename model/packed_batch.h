// A packed batch: the token ids of several sequences laid end to end, with per-token positions
// and the sequence boundaries. Both the training and the paged attention path take this form.
#ifndef LOCKSTEP_MODEL_PACKED_BATCH_H_
#define LOCKSTEP_MODEL_PACKED_BATCH_H_

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"

namespace lockstep {

struct PackedBatch {
  torch::Tensor token_ids;           // [num_tokens] int64
  torch::Tensor positions;           // [num_tokens] int64, position of each token in its sequence
  std::vector<int64_t> cu_seqlens;   // [num_sequences + 1], cu_seqlens[0] == 0

  int64_t num_tokens() const { return cu_seqlens.empty() ? 0 : cu_seqlens.back(); }
  int64_t num_sequences() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }
  int64_t sequence_length(int64_t s) const { return cu_seqlens[s + 1] - cu_seqlens[s]; }
};

// Packs whole sequences: positions start at 0 in each one. Errors on an empty sequence.
absl::StatusOr<PackedBatch> PackSequences(const std::vector<std::vector<int64_t>>& sequences);

// Packs continuations: sequence s holds new tokens whose positions start at start_positions[s]
// (the number of tokens already in its KV cache). Used by prefill chunks and decode steps.
absl::StatusOr<PackedBatch> PackContinuations(const std::vector<std::vector<int64_t>>& tokens,
                                              const std::vector<int64_t>& start_positions);

// Checks internal consistency (shapes, dtypes, monotone cu_seqlens) and that every token id is
// in [0, vocab_size). Returns InvalidArgument naming the problem.
absl::Status ValidateBatch(const PackedBatch& batch, int64_t vocab_size,
                           int64_t max_position_embeddings);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_PACKED_BATCH_H_
