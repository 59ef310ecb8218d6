#include "rewards/exact_match.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::rewards {
namespace {

struct ExactCase {
  const char* name;
  ExactMatchOptions options;
  const char* completion;
  const char* reference;
  double reward;
};

std::ostream& operator<<(std::ostream& os, const ExactCase& c) { return os << c.name; }

constexpr ExactMatchOptions kDefault{};
constexpr ExactMatchOptions kCaseless{.ignore_case = true};
constexpr ExactMatchOptions kRaw{.ignore_case = false, .normalize_whitespace = false};
constexpr ExactMatchOptions kSquad{
    .ignore_case = true, .normalize_whitespace = true, .strip_punctuation = true};

const std::vector<ExactCase>& ExactCases() {
  static const std::vector<ExactCase> cases = {
      {"Identical", kDefault, "Paris", "Paris", 1},
      {"Different", kDefault, "London", "Paris", 0},
      {"CaseMattersByDefault", kDefault, "paris", "Paris", 0},
      {"IgnoreCase", kCaseless, "PARIS", "Paris", 1},
      {"SurroundingWhitespace", kDefault, "  Paris \n", "Paris", 1},
      {"InnerWhitespaceRuns", kDefault, "New \t\n York", "New York", 1},
      {"InnerWhitespaceStillSeparates", kDefault, "NewYork", "New York", 0},
      {"RawKeepsWhitespace", kRaw, " Paris", "Paris", 0},
      {"RawIdentical", kRaw, "a  b", "a  b", 1},
      {"PunctuationMattersByDefault", kDefault, "Paris.", "Paris", 0},
      {"SquadStripsPunctuation", kSquad, "Paris!", "paris", 1},
      {"SquadCaseAndSpaces", kSquad, "  the  EIFFEL tower. ", "The Eiffel Tower", 1},
      {"Prefix", kDefault, "Paris, France", "Paris", 0},
      {"NonAsciiExact", kDefault, "Zürich", "Zürich", 1},
      {"NonAsciiCaseNotFolded", kCaseless, "ZÜRICH", "zürich", 0},
      {"EmptyCompletion", kDefault, "", "Paris", 0},
  };
  return cases;
}

class ExactMatchTableTest : public testing::TestWithParam<ExactCase> {};

TEST_P(ExactMatchTableTest, ScoresAsExpected) {
  const ExactCase& c = GetParam();
  ExactMatchReward reward(c.options);
  RewardInput input;
  input.completion = c.completion;
  input.reference = c.reference;
  absl::StatusOr<RewardResult> result = reward.Score(input);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->reward, c.reward);
}

INSTANTIATE_TEST_SUITE_P(Cases, ExactMatchTableTest, testing::ValuesIn(ExactCases()),
                         [](const testing::TestParamInfo<ExactCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ExactMatchTest, EmptyReferenceIsAnError) {
  ExactMatchReward reward({});
  RewardInput input;
  input.completion = "x";
  input.reference = "   ";
  EXPECT_EQ(reward.Score(input).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::rewards
