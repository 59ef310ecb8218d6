#include "rewards/rubric.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/exact_match.h"

namespace lockstep::rewards {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// A fake reward that returns fixed values, or fails.
class FixedReward final : public Reward {
 public:
  FixedReward(double reward, std::map<std::string, double> sub_scores)
      : result_{reward, std::move(sub_scores)} {}
  explicit FixedReward(absl::Status error) : error_(std::move(error)) {}

  absl::string_view name() const override { return "fixed"; }
  absl::StatusOr<RewardResult> Score(const RewardInput&) const override {
    if (!error_.ok()) return error_;
    return result_;
  }

 private:
  RewardResult result_;
  absl::Status error_;
};

RubricComponent Component(std::string name, double weight, std::unique_ptr<Reward> reward) {
  return RubricComponent{std::move(name), weight, std::move(reward)};
}

TEST(RubricTest, WeightedSumAndEveryComponentLogged) {
  std::vector<RubricComponent> components;
  components.push_back(Component(
      "correct", 1.0,
      std::make_unique<FixedReward>(1.0, std::map<std::string, double>{{"format", 1.0}})));
  components.push_back(Component(
      "style", 0.25, std::make_unique<FixedReward>(0.5, std::map<std::string, double>{})));
  components.push_back(Component(
      "length", 2.0,
      std::make_unique<FixedReward>(-0.1, std::map<std::string, double>{{"length", 120.0}})));
  auto rubric = Rubric::Create(std::move(components));
  ASSERT_TRUE(rubric.ok()) << rubric.status();
  absl::StatusOr<RewardResult> result = (*rubric)->Score({});
  ASSERT_TRUE(result.ok()) << result.status();
  // 1.0 * 1 + 0.25 * 0.5 + 2.0 * (-0.1)
  EXPECT_NEAR(result->reward, 0.925, 1e-12);
  EXPECT_THAT(result->sub_scores, ElementsAre(Pair("correct", 1.0), Pair("correct/format", 1.0),
                                              Pair("length", DoubleNear(-0.1, 1e-12)),
                                              Pair("length/length", 120.0), Pair("style", 0.5)));
}

TEST(RubricTest, ScoresRealRewards) {
  std::vector<RubricComponent> components;
  components.push_back(Component(
      "exact", 0.5, std::make_unique<ExactMatchReward>(ExactMatchOptions{.ignore_case = true})));
  components.push_back(
      Component("exact_raw", 0.5, std::make_unique<ExactMatchReward>(ExactMatchOptions{})));
  auto rubric = Rubric::Create(std::move(components));
  ASSERT_TRUE(rubric.ok());
  RewardInput input;
  input.completion = "PARIS";
  input.reference = "Paris";
  absl::StatusOr<RewardResult> result = (*rubric)->Score(input);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->reward, 0.5);
  EXPECT_EQ(result->sub_scores.at("exact"), 1.0);
  EXPECT_EQ(result->sub_scores.at("exact_raw"), 0.0);
}

TEST(RubricTest, AFailingComponentFailsTheItem) {
  std::vector<RubricComponent> components;
  components.push_back(
      Component("ok", 1.0, std::make_unique<FixedReward>(1.0, std::map<std::string, double>{})));
  components.push_back(
      Component("judge", 1.0, std::make_unique<FixedReward>(absl::UnavailableError("down"))));
  auto rubric = Rubric::Create(std::move(components));
  ASSERT_TRUE(rubric.ok());
  absl::StatusOr<RewardResult> result = (*rubric)->Score({});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("\"judge\""));
  EXPECT_THAT(result.status().message(), HasSubstr("down"));
}

TEST(RubricTest, RejectsBadComponents) {
  EXPECT_FALSE(Rubric::Create({}).ok());
  auto fixed = [] { return std::make_unique<FixedReward>(0.0, std::map<std::string, double>{}); };
  {
    std::vector<RubricComponent> components;
    components.push_back(Component("a", 1.0, fixed()));
    components.push_back(Component("a", 1.0, fixed()));
    EXPECT_THAT(Rubric::Create(std::move(components)).status().message(), HasSubstr("repeated"));
  }
  {
    std::vector<RubricComponent> components;
    components.push_back(Component("a/b", 1.0, fixed()));
    EXPECT_FALSE(Rubric::Create(std::move(components)).ok());
  }
  {
    std::vector<RubricComponent> components;
    components.push_back(Component("a", std::nan(""), fixed()));
    EXPECT_FALSE(Rubric::Create(std::move(components)).ok());
  }
  {
    std::vector<RubricComponent> components;
    components.push_back(Component("a", 1.0, nullptr));
    EXPECT_FALSE(Rubric::Create(std::move(components)).ok());
  }
}

}  // namespace
}  // namespace lockstep::rewards
