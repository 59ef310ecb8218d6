#include "data/dataset_iterator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

Dataset MakeDataset(int num_examples) {
  std::vector<Example> examples(num_examples);
  for (int i = 0; i < num_examples; ++i) examples[i].prompt = std::to_string(i);
  return Dataset(std::move(examples), "test");
}

std::vector<std::string> Take(DatasetIterator& iterator, int count) {
  std::vector<std::string> prompts;
  for (int i = 0; i < count; ++i) prompts.push_back(*iterator.Next().prompt);
  return prompts;
}

TEST(DatasetIteratorTest, EachEpochIsAPermutation) {
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order = EpochOrder(42, epoch, 100);
    std::sort(order.begin(), order.end());
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  }
  EXPECT_TRUE(EpochOrder(1, 0, 0).empty());
  EXPECT_EQ(EpochOrder(1, 0, 1), std::vector<int64_t>{0});
}

TEST(DatasetIteratorTest, OrderDependsOnlyOnSeedAndEpoch) {
  EXPECT_EQ(EpochOrder(42, 0, 50), EpochOrder(42, 0, 50));
  EXPECT_NE(EpochOrder(42, 0, 50), EpochOrder(43, 0, 50));
  EXPECT_NE(EpochOrder(42, 0, 50), EpochOrder(42, 1, 50));
  // Pinned values: the order must not change across platforms or releases.
  EXPECT_EQ(EpochOrder(7, 0, 8), (std::vector<int64_t>{3, 4, 7, 2, 0, 6, 1, 5}));
  EXPECT_EQ(EpochOrder(7, 1, 8), (std::vector<int64_t>{0, 3, 4, 6, 5, 1, 2, 7}));
}

TEST(DatasetIteratorTest, CrossesEpochsWithFreshOrder) {
  Dataset dataset = MakeDataset(10);
  DatasetIterator iterator(&dataset, 5);
  std::vector<std::string> first = Take(iterator, 10);
  EXPECT_EQ(iterator.epoch(), 0);
  std::vector<std::string> second = Take(iterator, 10);
  EXPECT_EQ(iterator.epoch(), 1);
  EXPECT_NE(first, second);
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(first, second);
}

TEST(DatasetIteratorTest, RestoredCursorContinuesExactly) {
  Dataset dataset = MakeDataset(7);
  for (int taken : {0, 3, 7, 11, 20}) {
    DatasetIterator original(&dataset, 1234);
    Take(original, taken);
    const DatasetCursor saved = original.cursor();
    absl::StatusOr<DatasetCursor> parsed = DatasetCursor::FromJson(
        nlohmann::json::parse(saved.ToJson().dump()));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, saved);
    absl::StatusOr<DatasetIterator> restored = DatasetIterator::Restore(&dataset, *parsed);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(Take(*restored, 15), Take(original, 15)) << "after " << taken;
  }
}

TEST(DatasetIteratorTest, LargeSeedsSurviveJson) {
  Dataset dataset = MakeDataset(3);
  DatasetIterator iterator(&dataset, UINT64_MAX - 1);
  absl::StatusOr<DatasetCursor> parsed =
      DatasetCursor::FromJson(nlohmann::json::parse(iterator.cursor().ToJson().dump()));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->seed, UINT64_MAX - 1);
}

TEST(DatasetIteratorTest, RejectsCursorOfAnotherDataset) {
  Dataset small = MakeDataset(3);
  Dataset large = MakeDataset(4);
  DatasetIterator iterator(&small, 1);
  EXPECT_EQ(DatasetIterator::Restore(&large, iterator.cursor()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  DatasetCursor bad = iterator.cursor();
  bad.position = 9;
  EXPECT_EQ(DatasetIterator::Restore(&small, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DatasetCursor::FromJson({{"seed", 1}}).ok());
  EXPECT_FALSE(DatasetCursor::FromJson(
                   {{"seed", "x1"}, {"epoch", 0}, {"position", 0}, {"num_examples", 3}})
                   .ok());
}

}  // namespace
}  // namespace lockstep
