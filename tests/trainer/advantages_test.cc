#include "trainer/advantages.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace lockstep::trainer {
namespace {

TEST(AdvantagesTest, GrpoNormalisesByUnbiasedStd) {
  // rewards {1, 0, 0, 1}: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3).
  AdvantageOptions options;
  options.kind = AdvantageKind::kGrpo;
  options.std_eps = 0;
  absl::StatusOr<std::vector<double>> a = GroupAdvantages({1, 0, 0, 1}, options);
  ASSERT_TRUE(a.ok()) << a.status();
  const double expected = 0.5 / std::sqrt(1.0 / 3.0);
  ASSERT_EQ(a->size(), 4u);
  EXPECT_NEAR((*a)[0], expected, 1e-12);
  EXPECT_NEAR((*a)[1], -expected, 1e-12);
  EXPECT_NEAR((*a)[2], -expected, 1e-12);
  EXPECT_NEAR((*a)[3], expected, 1e-12);
}

TEST(AdvantagesTest, GrpoEpsilonEntersTheDenominator) {
  AdvantageOptions options;
  options.std_eps = 0.5;
  absl::StatusOr<std::vector<double>> a = GroupAdvantages({3, 1}, options);
  ASSERT_TRUE(a.ok());
  // mean 2, std sqrt(2), A = +-1 / (sqrt 2 + 0.5)
  EXPECT_NEAR((*a)[0], 1.0 / (std::sqrt(2.0) + 0.5), 1e-12);
  EXPECT_NEAR((*a)[1], -1.0 / (std::sqrt(2.0) + 0.5), 1e-12);
}

TEST(AdvantagesTest, DrGrpoSubtractsTheMeanOnly) {
  AdvantageOptions options;
  options.kind = AdvantageKind::kDrGrpo;
  absl::StatusOr<std::vector<double>> a = GroupAdvantages({2, 4, 9}, options);
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ((*a)[0], -3);
  EXPECT_DOUBLE_EQ((*a)[1], -1);
  EXPECT_DOUBLE_EQ((*a)[2], 4);
}

TEST(AdvantagesTest, RlooUsesLeaveOneOutMean) {
  AdvantageOptions options;
  options.kind = AdvantageKind::kRloo;
  absl::StatusOr<std::vector<double>> a = GroupAdvantages({2, 4, 9}, options);
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ((*a)[0], 2 - 6.5);  // mean of {4, 9}
  EXPECT_DOUBLE_EQ((*a)[1], 4 - 5.5);  // mean of {2, 9}
  EXPECT_DOUBLE_EQ((*a)[2], 9 - 3.0);  // mean of {2, 4}
}

TEST(AdvantagesTest, ZeroVarianceGroupsAreDroppedOnlyWhenAsked) {
  AdvantageOptions options;
  absl::StatusOr<std::vector<double>> kept = GroupAdvantages({1, 1, 1}, options);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, std::vector<double>({0, 0, 0}));
  options.drop_zero_variance_groups = true;
  absl::StatusOr<std::vector<double>> dropped = GroupAdvantages({1, 1, 1}, options);
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->empty());
  absl::StatusOr<std::vector<double>> varied = GroupAdvantages({1, 0, 1}, options);
  ASSERT_TRUE(varied.ok());
  EXPECT_EQ(varied->size(), 3u);
}

TEST(AdvantagesTest, SingleSampleHasZeroAdvantage) {
  for (AdvantageKind kind : {AdvantageKind::kGrpo, AdvantageKind::kDrGrpo, AdvantageKind::kRloo}) {
    AdvantageOptions options;
    options.kind = kind;
    absl::StatusOr<std::vector<double>> a = GroupAdvantages({5}, options);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(*a, std::vector<double>({0}));
  }
}

TEST(AdvantagesTest, RejectsEmptyAndNonFinite) {
  AdvantageOptions options;
  EXPECT_EQ(GroupAdvantages({}, options).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = GroupAdvantages({1, std::numeric_limits<double>::quiet_NaN()}, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("reward 1"), std::string::npos) << s;
  EXPECT_FALSE(GroupAdvantages({INFINITY, 0}, options).ok());
}

TEST(AdvantagesTest, ParsesKindNames) {
  EXPECT_EQ(*ParseAdvantageKind("rloo"), AdvantageKind::kRloo);
  EXPECT_EQ(AdvantageKindName(*ParseAdvantageKind("dr_grpo")), "dr_grpo");
  EXPECT_FALSE(ParseAdvantageKind("ppo").ok());
}

}  // namespace
}  // namespace lockstep::trainer
