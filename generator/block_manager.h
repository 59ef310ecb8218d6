// A fixed pool of KV-cache blocks and the block tables of the sequences that use them.
//
// Blocks are reference-counted so that the `n` samples of one prompt share the prompt's blocks
// (Fork). A sequence about to write into a block that another sequence also holds first gets a
// private copy (copy-on-write): the manager picks the new block and reports a BlockCopy, which
// the model runner applies to the cache before the forward writes into it.
//
// Thread safety: none; used by the engine thread only.
#ifndef LOCKSTEP_GENERATOR_BLOCK_MANAGER_H_
#define LOCKSTEP_GENERATOR_BLOCK_MANAGER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "generator/sequence.h"
#include "model/config.h"

namespace lockstep::generator {

// Copy all rows of cache block `source` into block `destination` (every layer, keys and values).
struct BlockCopy {
  int32_t source = 0;
  int32_t destination = 0;
};

class BlockManager {
 public:
  // bytes per block = 2 (K and V) × layers × block_size × kv_heads × head_dim × 4 (fp32).
  static int64_t BytesPerBlock(const ModelConfig& config, int64_t block_size);
  // Blocks that fit in `budget_bytes` (floor).
  static int64_t NumBlocksForBudget(const ModelConfig& config, int64_t block_size,
                                    int64_t budget_bytes);

  BlockManager(int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_blocks_.size()); }
  int64_t ref_count(int32_t block) const { return ref_counts_[block]; }

  // Blocks to cover `seq` positions 0 .. num_tokens - 1, for the tokens from
  // seq.num_computed_tokens on to be written: new blocks, plus one if the first written block is
  // shared (copy-on-write).
  int64_t NumBlocksNeeded(const Sequence& seq, int64_t num_tokens) const;

  // True iff enough free blocks exist for Allocate(seq, num_tokens).
  bool CanAllocate(const Sequence& seq, int64_t num_tokens) const;
  // Grows seq.block_table to cover num_tokens positions and makes the first block that will be
  // written private; appends the copy to `copies` when one is needed. Requires CanAllocate.
  void Allocate(Sequence& seq, int64_t num_tokens, std::vector<BlockCopy>* copies);

  // Room for one more token (a decode step): CanAllocate(seq, seq.num_computed_tokens + 1).
  bool CanAppend(const Sequence& seq) const;
  void AppendSlot(Sequence& seq, std::vector<BlockCopy>* copies);

  // Releases every block of seq (ref count - 1; free at 0) and clears its table.
  void Deallocate(Sequence& seq);

  // child shares all of parent's blocks (ref count + 1 each) and its cached-token count.
  void Fork(const Sequence& parent, Sequence& child);

 private:
  int32_t TakeFreeBlock();

  int64_t block_size_;
  std::vector<int64_t> ref_counts_;
  std::deque<int32_t> free_blocks_;
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_BLOCK_MANAGER_H_
