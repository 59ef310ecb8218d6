#include "model/packed_batch.h"

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::StatusOr<PackedBatch> PackContinuations(const std::vector<std::vector<int64_t>>& tokens,
                                              const std::vector<int64_t>& start_positions) {
  if (tokens.size() != start_positions.size()) {
    return absl::InvalidArgumentError(absl::StrCat("PackContinuations: ", tokens.size(),
                                                   " sequences but ", start_positions.size(),
                                                   " start positions"));
  }
  if (tokens.empty()) return absl::InvalidArgumentError("PackContinuations: no sequences");
  PackedBatch batch;
  batch.cu_seqlens.reserve(tokens.size() + 1);
  batch.cu_seqlens.push_back(0);
  std::vector<int64_t> ids, positions;
  for (size_t s = 0; s < tokens.size(); ++s) {
    if (tokens[s].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " is empty"));
    }
    if (start_positions[s] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " starts at a negative position"));
    }
    for (size_t j = 0; j < tokens[s].size(); ++j) {
      ids.push_back(tokens[s][j]);
      positions.push_back(start_positions[s] + static_cast<int64_t>(j));
    }
    batch.cu_seqlens.push_back(static_cast<int64_t>(ids.size()));
  }
  batch.token_ids = torch::tensor(ids, torch::kInt64);
  batch.positions = torch::tensor(positions, torch::kInt64);
  return batch;
}

absl::StatusOr<PackedBatch> PackSequences(const std::vector<std::vector<int64_t>>& sequences) {
  return PackContinuations(sequences, std::vector<int64_t>(sequences.size(), 0));
}

absl::Status ValidateBatch(const PackedBatch& batch, int64_t vocab_size,
                           int64_t max_position_embeddings) {
  if (batch.cu_seqlens.size() < 2 || batch.cu_seqlens.front() != 0) {
    return absl::InvalidArgumentError("batch: cu_seqlens must start at 0 and name >= 1 sequence");
  }
  for (size_t s = 1; s < batch.cu_seqlens.size(); ++s) {
    if (batch.cu_seqlens[s] <= batch.cu_seqlens[s - 1]) {
      return absl::InvalidArgumentError(absl::StrCat("batch: sequence ", s - 1, " is empty"));
    }
  }
  const int64_t n = batch.num_tokens();
  for (const auto& [name, t] : {std::pair{"token_ids", &batch.token_ids},
                                std::pair{"positions", &batch.positions}}) {
    if (!t->defined() || t->dim() != 1 || t->size(0) != n || t->scalar_type() != torch::kInt64) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch: ", name, " must be an int64 vector of ", n, " tokens"));
    }
  }
  const auto [min_id, max_id] = torch::aminmax(batch.token_ids);
  if (min_id.item<int64_t>() < 0 || max_id.item<int64_t>() >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("batch: token id out of range [0, ", vocab_size,
                                                   "): min ", min_id.item<int64_t>(), ", max ",
                                                   max_id.item<int64_t>()));
  }
  const auto [min_pos, max_pos] = torch::aminmax(batch.positions);
  if (min_pos.item<int64_t>() < 0 || max_pos.item<int64_t>() >= max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch: position out of range [0, max_position_embeddings=",
                     max_position_embeddings, "): max ", max_pos.item<int64_t>()));
  }
  return absl::OkStatus();
}

}  // namespace lockstep
