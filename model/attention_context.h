// How attention sees the keys of a packed batch. Two modes share one model forward:
//  - TrainingAttention: every sequence of the batch is complete; causal attention within each
//    sequence, no cache.
//  - PagedAttention: each sequence continues from tokens already in a block KV cache. The new
//    tokens' keys and values are appended to the cache, then each new token attends to all
//    cached tokens of its sequence up to and including itself.
// The model never allocates the KV cache: the caller (the generator's model runner) owns it and
// hands views in through PagedKvCache.
#ifndef LOCKSTEP_MODEL_ATTENTION_CONTEXT_H_
#define LOCKSTEP_MODEL_ATTENTION_CONTEXT_H_

#include <cstdint>
#include <variant>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "model/config.h"
#include "model/forward_kind.h"

namespace lockstep {

// Block KV cache for all layers. keys[l] and values[l] are
// [num_blocks, block_size, num_key_value_heads, head_dim] in the model's compute dtype.
struct PagedKvCache {
  int64_t block_size = 16;
  std::vector<torch::Tensor> keys;
  std::vector<torch::Tensor> values;

  int64_t num_blocks() const { return keys.empty() ? 0 : keys[0].size(0); }
};

// Allocates an empty (zeroed) cache for `config`. For the generator's runner and for tests; the
// model itself never calls this.
PagedKvCache AllocatePagedKvCache(const ModelConfig& config, int64_t num_blocks,
                                  int64_t block_size, torch::Dtype dtype);

// Block tables giving sequence s the blocks [s * blocks_per_sequence, (s + 1) *
// blocks_per_sequence): the simplest layout, for fixed batches (tools, tests, benchmarks).
std::vector<std::vector<int32_t>> ContiguousBlockTables(int64_t num_sequences,
                                                        int64_t blocks_per_sequence);

struct TrainingAttention {
  static constexpr ForwardKind kind = ForwardKind::kTraining;
};

struct PagedAttention {
  static constexpr ForwardKind kind = ForwardKind::kPaged;
  PagedKvCache* cache = nullptr;  // not owned; written by the forward (new keys/values)
  // Per sequence of the batch: the cache blocks holding its tokens, in position order. They must
  // cover positions [0, start + new_tokens). The start of each sequence is its first position.
  std::vector<std::vector<int32_t>> block_tables;
};

using AttentionContext = std::variant<TrainingAttention, PagedAttention>;

// The kind of the forward over `context` (its alternative's `kind`).
inline ForwardKind KindOf(const AttentionContext& context) {
  return std::visit([](const auto& attention) { return attention.kind; }, context);
}

// Checks that block tables match the batch and the cache (one table per sequence, enough blocks,
// ids in range, layer count and shapes). `first_positions[s]` is sequence s's first position.
absl::Status ValidatePagedAttention(const PagedAttention& paged, const ModelConfig& config,
                                    const std::vector<int64_t>& first_positions,
                                    const std::vector<int64_t>& cu_seqlens);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_ATTENTION_CONTEXT_H_
