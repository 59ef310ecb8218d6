#include "rewards/length_penalty.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::rewards {
namespace {

struct LengthCase {
  const char* name;
  LengthPenaltyOptions options;
  const char* completion;
  std::vector<int32_t> token_ids;
  double reward;
  double length;
};

std::ostream& operator<<(std::ostream& os, const LengthCase& c) { return os << c.name; }

// Band [2, 5] characters, 0.1 per character outside, capped at 0.35.
constexpr LengthPenaltyOptions kChars{.unit = LengthUnit::kCharacters,
                                      .min_length = 2,
                                      .max_length = 5,
                                      .penalty_per_unit = 0.1,
                                      .max_penalty = 0.35};
constexpr LengthPenaltyOptions kWords{.unit = LengthUnit::kWords,
                                      .min_length = 0,
                                      .max_length = 3,
                                      .penalty_per_unit = 0.5,
                                      .max_penalty = 1.0};
// DAPO overlong: L_max = 8, L_cache = 4 -> band [0, 4], slope 1/4, cap 1.
constexpr LengthPenaltyOptions kDapo{.unit = LengthUnit::kTokens,
                                     .min_length = 0,
                                     .max_length = 4,
                                     .penalty_per_unit = 0.25,
                                     .max_penalty = 1.0};

const std::vector<LengthCase>& LengthCases() {
  static const std::vector<LengthCase> cases = {
      {"InsideBand", kChars, "abc", {}, 0.0, 3},
      {"LowerEdge", kChars, "ab", {}, 0.0, 2},
      {"UpperEdge", kChars, "abcde", {}, 0.0, 5},
      {"OneOverUpper", kChars, "abcdef", {}, -0.1, 6},
      {"TwoOverUpper", kChars, "abcdefg", {}, -0.2, 7},
      {"OneUnderLower", kChars, "a", {}, -0.1, 1},
      {"EmptyIsUnderLower", kChars, "", {}, -0.2, 0},
      {"CappedAtMaxPenalty", kChars, "abcdefghijklmnop", {}, -0.35, 16},
      {"CharactersAreCodePoints", kChars, "\xC3\xA9\xC3\xA9\xC3\xA9", {}, 0.0, 3},
      {"WordsInside", kWords, "one two  three", {}, 0.0, 3},
      {"WordsOver", kWords, " one\ttwo\nthree four ", {}, -0.5, 4},
      {"WordsCapped", kWords, "a b c d e f g", {}, -1.0, 7},
      {"DapoInsideCache", kDapo, "", {1, 2, 3, 4}, 0.0, 4},
      {"DapoHalfway", kDapo, "", {1, 2, 3, 4, 5, 6}, -0.5, 6},
      {"DapoAtMax", kDapo, "", {1, 2, 3, 4, 5, 6, 7, 8}, -1.0, 8},
      {"DapoBeyondMax", kDapo, "", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, -1.0, 10},
  };
  return cases;
}

class LengthPenaltyTableTest : public testing::TestWithParam<LengthCase> {};

TEST_P(LengthPenaltyTableTest, ScoresAsExpected) {
  const LengthCase& c = GetParam();
  auto reward = LengthPenaltyReward::Create(c.options);
  ASSERT_TRUE(reward.ok()) << reward.status();
  RewardInput input;
  input.completion = c.completion;
  input.completion_token_ids = c.token_ids;
  absl::StatusOr<RewardResult> result = (*reward)->Score(input);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->reward, c.reward, 1e-12);
  EXPECT_EQ(result->sub_scores.at("length"), c.length);
}

INSTANTIATE_TEST_SUITE_P(Cases, LengthPenaltyTableTest, testing::ValuesIn(LengthCases()),
                         [](const testing::TestParamInfo<LengthCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(LengthPenaltyTest, TokensUnitNeedsTokenIds) {
  auto reward = LengthPenaltyReward::Create(kDapo);
  ASSERT_TRUE(reward.ok());
  RewardInput input;
  input.completion = "text but no ids";
  EXPECT_EQ((*reward)->Score(input).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LengthPenaltyTest, RejectsBadOptions) {
  LengthPenaltyOptions options = kChars;
  options.max_length = 1;  // below min_length
  EXPECT_FALSE(LengthPenaltyReward::Create(options).ok());
  options = kChars;
  options.penalty_per_unit = -1;
  EXPECT_FALSE(LengthPenaltyReward::Create(options).ok());
  options = kChars;
  options.max_penalty = -0.5;
  EXPECT_FALSE(LengthPenaltyReward::Create(options).ok());
  EXPECT_FALSE(LengthPenaltyReward::Create(LengthPenaltyOptions{}).ok());  // no max_length
}

}  // namespace
}  // namespace lockstep::rewards
