// LocalRewardScorer: in-process rewards behind the same asynchronous interface and failure
// policy as the remote client.
#include "rewards/local_reward_scorer.h"

#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/reward_registry.h"

namespace lockstep::rewards {
namespace {

using ::testing::HasSubstr;

class NumberReward final : public Reward {
 public:
  absl::string_view name() const override { return "number"; }
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override {
    if (input.completion == "fail") return absl::InternalError("verifier crashed");
    RewardResult result;
    result.reward = std::strtod(input.completion.c_str(), nullptr);
    return result;
  }
};

RewardInput Item(const std::string& completion, const std::string& reference = "") {
  RewardInput input;
  input.completion = completion;
  input.reference = reference;
  return input;
}

TEST(LocalRewardScorerTest, ScoresTheMathBuiltinOffTheCallersThread) {
  LocalRewardScorer scorer(*CreateBuiltinReward("math"));
  EXPECT_EQ(scorer.name(), "math (in-process)");
  const std::thread::id caller = std::this_thread::get_id();
  std::promise<std::thread::id> scored_on;
  std::promise<std::vector<ItemOutcome>> result;
  scorer.ScoreAsync({Item("\\boxed{4}", "4"), Item("\\boxed{5}", "4")},
                    [&](std::vector<ItemOutcome> outcomes) {
                      scored_on.set_value(std::this_thread::get_id());
                      result.set_value(std::move(outcomes));
                    });
  const std::vector<ItemOutcome> outcomes = result.get_future().get();
  EXPECT_NE(scored_on.get_future().get(), caller);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[0].ok);
  EXPECT_EQ(outcomes[0].reward, 1.0);
  EXPECT_TRUE(outcomes[1].ok);
  EXPECT_EQ(outcomes[1].reward, 0.0);
}

TEST(LocalRewardScorerTest, ErrorsAndNonFiniteRewardsAreFailedItemsNotZeros) {
  LocalRewardScorer scorer(std::make_unique<NumberReward>(), /*num_threads=*/2);
  const std::vector<ItemOutcome> outcomes =
      scorer.Score({Item("0.5"), Item("nan"), Item("fail"), Item("-inf")});
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[0].ok);
  EXPECT_FALSE(outcomes[1].ok);
  EXPECT_THAT(outcomes[1].error, HasSubstr("non-finite"));
  EXPECT_FALSE(outcomes[2].ok);
  EXPECT_THAT(outcomes[2].error, HasSubstr("verifier crashed"));
  EXPECT_FALSE(outcomes[3].ok);
  const ClientMetrics metrics = scorer.metrics();
  EXPECT_EQ(metrics.items_sent, 4);
  EXPECT_EQ(metrics.items_scored, 1);
  EXPECT_EQ(metrics.items_failed, 3);
  EXPECT_EQ(metrics.items_in_flight, 0);
  EXPECT_EQ(metrics.rpcs, 0);
}

TEST(LocalRewardScorerTest, DestructionScoresWhatIsQueued) {
  std::atomic<int> num_items{0};
  {
    LocalRewardScorer scorer(std::make_unique<NumberReward>());
    for (int i = 0; i < 50; ++i) {
      scorer.ScoreAsync({Item("1"), Item("2")}, [&](std::vector<ItemOutcome> outcomes) {
        num_items += static_cast<int>(outcomes.size());
      });
    }
  }
  EXPECT_EQ(num_items.load(), 100);
}

}  // namespace
}  // namespace lockstep::rewards
