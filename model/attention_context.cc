#include "model/attention_context.h"

#include "absl/strings/str_cat.h"

namespace lockstep {

PagedKvCache AllocatePagedKvCache(const ModelConfig& config, int64_t num_blocks,
                                  int64_t block_size, torch::Dtype dtype) {
  PagedKvCache cache;
  cache.block_size = block_size;
  const auto options = torch::TensorOptions().dtype(dtype);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    cache.keys.push_back(torch::zeros(
        {num_blocks, block_size, config.num_key_value_heads, config.head_dim}, options));
    cache.values.push_back(torch::zeros_like(cache.keys.back()));
  }
  return cache;
}

std::vector<std::vector<int32_t>> ContiguousBlockTables(int64_t num_sequences,
                                                        int64_t blocks_per_sequence) {
  std::vector<std::vector<int32_t>> tables(num_sequences);
  for (int64_t s = 0; s < num_sequences; ++s) {
    for (int64_t b = 0; b < blocks_per_sequence; ++b) {
      tables[s].push_back(static_cast<int32_t>(s * blocks_per_sequence + b));
    }
  }
  return tables;
}

absl::Status ValidatePagedAttention(const PagedAttention& paged, const ModelConfig& config,
                                    const std::vector<int64_t>& first_positions,
                                    const std::vector<int64_t>& cu_seqlens) {
  if (paged.cache == nullptr) return absl::InvalidArgumentError("paged attention: no KV cache");
  const PagedKvCache& cache = *paged.cache;
  if (static_cast<int64_t>(cache.keys.size()) != config.num_hidden_layers ||
      cache.values.size() != cache.keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat("paged attention: cache has ", cache.keys.size(),
                                                   " layers, model has ",
                                                   config.num_hidden_layers));
  }
  if (cache.block_size <= 0) return absl::InvalidArgumentError("paged attention: block_size <= 0");
  const std::vector<int64_t> expected = {cache.num_blocks(), cache.block_size,
                                         config.num_key_value_heads, config.head_dim};
  for (size_t l = 0; l < cache.keys.size(); ++l) {
    if (cache.keys[l].sizes() != expected || cache.values[l].sizes() != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("paged attention: cache layer ", l, " has the wrong shape"));
    }
  }
  const size_t num_sequences = cu_seqlens.size() - 1;
  if (paged.block_tables.size() != num_sequences) {
    return absl::InvalidArgumentError(absl::StrCat("paged attention: ", paged.block_tables.size(),
                                                   " block tables for ", num_sequences,
                                                   " sequences"));
  }
  for (size_t s = 0; s < num_sequences; ++s) {
    const int64_t end = first_positions[s] + cu_seqlens[s + 1] - cu_seqlens[s];
    const int64_t needed = (end + cache.block_size - 1) / cache.block_size;
    const auto& table = paged.block_tables[s];
    if (static_cast<int64_t>(table.size()) < needed) {
      return absl::InvalidArgumentError(absl::StrCat("paged attention: sequence ", s, " needs ",
                                                     needed, " blocks, table has ", table.size()));
    }
    for (int32_t block : table) {
      if (block < 0 || block >= cache.num_blocks()) {
        return absl::InvalidArgumentError(absl::StrCat("paged attention: sequence ", s,
                                                       " names block ", block, " outside [0, ",
                                                       cache.num_blocks(), ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep
