#include "generator/scheduler.h"

#include "gtest/gtest.h"

namespace lockstep::generator {
namespace {

Sequence MakeSequence(int64_t request_id, int64_t prompt_len) {
  return Sequence(request_id, 0, std::vector<int64_t>(prompt_len, 1), SamplingParams{}, 0);
}

TEST(SchedulerTest, ChunksPrefillsByTokenBudgetAndPutsDecodesFirst) {
  BlockManager blocks(64, 4);
  Scheduler scheduler({/*max_num_batched_tokens=*/10, /*max_num_seqs=*/8}, &blocks);
  Sequence a = MakeSequence(0, 3), b = MakeSequence(1, 25);
  scheduler.Add(&a);
  scheduler.Add(&b);

  ScheduledStep step = scheduler.Schedule();  // a whole (3), b's first chunk (7)
  ASSERT_EQ(step.sequences.size(), 2u);
  EXPECT_EQ(step.sequences[0].num_new_tokens, 3);
  EXPECT_TRUE(step.sequences[0].samples());
  EXPECT_EQ(step.sequences[1].num_new_tokens, 7);
  EXPECT_FALSE(step.sequences[1].samples());
  scheduler.Commit(step);
  a.AppendToken(5, -1.0f, 0);

  step = scheduler.Schedule();  // a decodes first (1), b takes the rest of the budget (9)
  scheduler.Commit(step);
  int64_t total = 0;
  for (const auto& s : step.sequences) total += s.num_new_tokens;
  EXPECT_EQ(total, 10);

  for (int i = 0; i < 5 && b.num_computed_tokens < 25; ++i) {
    step = scheduler.Schedule();
    for (const auto& s : step.sequences) EXPECT_LE(s.num_new_tokens, 10);
    scheduler.Commit(step);
  }
  EXPECT_EQ(b.num_computed_tokens, 25);
  EXPECT_EQ(a.num_computed_tokens, 4);  // a's decode was not starved
}

TEST(SchedulerTest, PreemptsMostRecentRunningSequenceWhenBlocksRunOut) {
  BlockManager blocks(4, 4);
  Scheduler scheduler({64, 8}, &blocks);
  Sequence a = MakeSequence(0, 8), b = MakeSequence(1, 8);
  scheduler.Add(&a);
  scheduler.Add(&b);
  ScheduledStep step = scheduler.Schedule();
  ASSERT_EQ(step.sequences.size(), 2u);  // 2 blocks each: pool full
  scheduler.Commit(step);
  a.AppendToken(1, -1.0f, 0);
  b.AppendToken(1, -1.0f, 0);

  step = scheduler.Schedule();  // a needs a third block: b is preempted
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.sequences[0].seq, &a);
  EXPECT_EQ(step.num_preempted, 1);
  EXPECT_EQ(b.status, SequenceStatus::kWaiting);
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(scheduler.num_waiting(), 1);
  scheduler.Commit(step);

  scheduler.Finish(&a, FinishReason::kMaxTokens);
  step = scheduler.Schedule();  // b re-prefills prompt + generated
  ASSERT_EQ(step.sequences.size(), 1u);
  EXPECT_EQ(step.sequences[0].seq, &b);
  EXPECT_EQ(step.sequences[0].num_new_tokens, 9);
  EXPECT_TRUE(step.sequences[0].samples());
  scheduler.Commit(step);
  scheduler.Finish(&b, FinishReason::kMaxTokens);
  EXPECT_FALSE(scheduler.HasUnfinished());
  EXPECT_EQ(blocks.num_free_blocks(), 4);
}

}  // namespace
}  // namespace lockstep::generator
