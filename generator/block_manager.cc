#include "generator/block_manager.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace lockstep::generator {

int64_t BlockManager::BytesPerBlock(const ModelConfig& config, int64_t block_size) {
  return 2 * config.num_hidden_layers * block_size * config.num_key_value_heads * config.head_dim *
         4;
}

int64_t BlockManager::NumBlocksForBudget(const ModelConfig& config, int64_t block_size,
                                         int64_t budget_bytes) {
  return budget_bytes / BytesPerBlock(config, block_size);
}

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size)
    : block_size_(block_size), ref_counts_(num_blocks, 0) {
  TORCH_CHECK(num_blocks > 0 && block_size > 0, "BlockManager needs blocks");
  for (int64_t b = 0; b < num_blocks; ++b) free_blocks_.push_back(static_cast<int32_t>(b));
}

int64_t BlockManager::NumBlocksNeeded(const Sequence& seq, int64_t num_tokens) const {
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  int64_t needed = std::max<int64_t>(0, want - have);
  const int64_t first_written = seq.num_computed_tokens / block_size_;
  if (num_tokens > seq.num_computed_tokens && first_written < have &&
      ref_counts_[seq.block_table[first_written]] > 1) {
    ++needed;
  }
  return needed;
}

bool BlockManager::CanAllocate(const Sequence& seq, int64_t num_tokens) const {
  return NumBlocksNeeded(seq, num_tokens) <= num_free_blocks();
}

void BlockManager::Allocate(Sequence& seq, int64_t num_tokens, std::vector<BlockCopy>* copies) {
  TORCH_CHECK(CanAllocate(seq, num_tokens), "Allocate without room");
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  const int64_t first_written = seq.num_computed_tokens / block_size_;
  if (num_tokens > seq.num_computed_tokens && first_written < have) {
    int32_t& block = seq.block_table[first_written];
    if (ref_counts_[block] > 1) {  // copy-on-write: the rows before ours are shared
      const int32_t copy = TakeFreeBlock();
      copies->push_back({block, copy});
      --ref_counts_[block];
      block = copy;
    }
  }
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  while (static_cast<int64_t>(seq.block_table.size()) < want) {
    seq.block_table.push_back(TakeFreeBlock());
  }
}

bool BlockManager::CanAppend(const Sequence& seq) const {
  return CanAllocate(seq, seq.num_computed_tokens + 1);
}

void BlockManager::AppendSlot(Sequence& seq, std::vector<BlockCopy>* copies) {
  Allocate(seq, seq.num_computed_tokens + 1, copies);
}

void BlockManager::Deallocate(Sequence& seq) {
  for (int32_t block : seq.block_table) {
    TORCH_CHECK(ref_counts_[block] > 0, "double free of block ", block);
    if (--ref_counts_[block] == 0) free_blocks_.push_back(block);
  }
  seq.block_table.clear();
  seq.num_computed_tokens = 0;
}

void BlockManager::Fork(const Sequence& parent, Sequence& child) {
  TORCH_CHECK(child.block_table.empty(), "Fork into a sequence that holds blocks");
  for (int32_t block : parent.block_table) ++ref_counts_[block];
  child.block_table = parent.block_table;
  child.num_computed_tokens = parent.num_computed_tokens;
}

int32_t BlockManager::TakeFreeBlock() {
  TORCH_CHECK(!free_blocks_.empty(), "out of KV blocks");
  const int32_t block = free_blocks_.front();
  free_blocks_.pop_front();
  ref_counts_[block] = 1;
  return block;
}

}  // namespace lockstep::generator
