#include "generator/block_manager.h"

#include "gtest/gtest.h"
#include "model/config.h"

namespace lockstep::generator {
namespace {

Sequence MakeSequence(int64_t prompt_len) {
  return Sequence(0, 0, std::vector<int64_t>(prompt_len, 1), SamplingParams{}, 0);
}

TEST(BlockManagerTest, SizesPoolFromByteBudget) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  // 2 × 4 layers × 16 × 2 kv heads × 32 × 4 bytes
  EXPECT_EQ(BlockManager::BytesPerBlock(config, 16), 2 * 4 * 16 * 2 * 32 * 4);
  EXPECT_EQ(BlockManager::NumBlocksForBudget(config, 16, 10 * 32768 + 5), 10);
}

TEST(BlockManagerTest, AllocateGrowsTableAndDeallocateReturnsBlocks) {
  BlockManager manager(8, 4);
  Sequence seq = MakeSequence(10);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(manager.CanAllocate(seq, 6));
  manager.Allocate(seq, 6, &copies);  // chunk 1: positions 0..5 → 2 blocks
  EXPECT_EQ(seq.block_table.size(), 2u);
  seq.num_computed_tokens = 6;
  manager.Allocate(seq, 10, &copies);  // chunk 2: positions 6..9 → 3 blocks
  EXPECT_EQ(seq.block_table.size(), 3u);
  seq.num_computed_tokens = 10;
  EXPECT_TRUE(manager.CanAppend(seq));  // position 10 fits the third block
  manager.AppendSlot(seq, &copies);
  EXPECT_EQ(seq.block_table.size(), 3u);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(manager.num_free_blocks(), 5);
  manager.Deallocate(seq);
  EXPECT_EQ(manager.num_free_blocks(), 8);
  EXPECT_TRUE(seq.block_table.empty());
}

TEST(BlockManagerTest, ReportsOutOfBlocks) {
  BlockManager manager(2, 4);
  Sequence seq = MakeSequence(9);
  EXPECT_FALSE(manager.CanAllocate(seq, 9));  // needs 3 blocks
  EXPECT_TRUE(manager.CanAllocate(seq, 8));
  std::vector<BlockCopy> copies;
  manager.Allocate(seq, 8, &copies);
  seq.num_computed_tokens = 8;
  EXPECT_FALSE(manager.CanAppend(seq));
  EXPECT_EQ(manager.num_free_blocks(), 0);
}

TEST(BlockManagerTest, ForkSharesBlocksAndCopiesSharedPartialBlockOnWrite) {
  BlockManager manager(8, 4);
  Sequence parent = MakeSequence(6);  // blocks: [full 0..3][partial 4..5]
  std::vector<BlockCopy> copies;
  manager.Allocate(parent, 6, &copies);
  parent.num_computed_tokens = 6;
  Sequence child = MakeSequence(6);
  manager.Fork(parent, child);
  EXPECT_EQ(child.block_table, parent.block_table);
  for (int32_t block : parent.block_table) EXPECT_EQ(manager.ref_count(block), 2);
  EXPECT_EQ(manager.num_free_blocks(), 6);

  // The child writes position 6 into the shared partial block: it gets a private copy.
  EXPECT_EQ(manager.NumBlocksNeeded(child, 7), 1);
  manager.AppendSlot(child, &copies);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].source, parent.block_table[1]);
  EXPECT_EQ(copies[0].destination, child.block_table[1]);
  EXPECT_NE(child.block_table[1], parent.block_table[1]);
  EXPECT_EQ(child.block_table[0], parent.block_table[0]);  // full prompt block stays shared
  EXPECT_EQ(manager.ref_count(parent.block_table[0]), 2);
  EXPECT_EQ(manager.ref_count(parent.block_table[1]), 1);

  // The parent is now the only holder of its partial block: it writes in place.
  copies.clear();
  manager.AppendSlot(parent, &copies);
  EXPECT_TRUE(copies.empty());

  manager.Deallocate(child);
  EXPECT_EQ(manager.ref_count(parent.block_table[0]), 1);
  manager.Deallocate(parent);
  EXPECT_EQ(manager.num_free_blocks(), 8);
}

TEST(BlockManagerTest, ForkOfFullBlocksNeedsNoCopy) {
  BlockManager manager(4, 4);
  Sequence parent = MakeSequence(8);
  std::vector<BlockCopy> copies;
  manager.Allocate(parent, 8, &copies);
  parent.num_computed_tokens = 8;
  Sequence child = MakeSequence(8);
  manager.Fork(parent, child);
  manager.AppendSlot(child, &copies);  // position 8 starts a fresh block
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.block_table.size(), 3u);
  EXPECT_EQ(manager.num_free_blocks(), 1);
  manager.Deallocate(parent);
  manager.Deallocate(child);
  EXPECT_EQ(manager.num_free_blocks(), 4);
}

}  // namespace
}  // namespace lockstep::generator
