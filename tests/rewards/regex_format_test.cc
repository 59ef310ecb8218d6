#include "rewards/regex_format.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::rewards {
namespace {

constexpr char kThinkAnswer[] = R"(^<think>.*?</think>\s*<answer>.*?</answer>$)";

struct RegexCase {
  const char* name;
  RegexFormatOptions options;
  const char* completion;
  bool matches;
};

std::ostream& operator<<(std::ostream& os, const RegexCase& c) { return os << c.name; }

RegexFormatOptions Pattern(const char* pattern) {
  RegexFormatOptions options;
  options.pattern = pattern;
  return options;
}

RegexFormatOptions With(RegexFormatOptions options, void (*edit)(RegexFormatOptions&)) {
  edit(options);
  return options;
}

const std::vector<RegexCase>& RegexCases() {
  static const std::vector<RegexCase> cases = {
      {"ThinkAnswerLayout", Pattern(kThinkAnswer),
       "<think>\nlet me see\n2+2=4\n</think>\n<answer>4</answer>", true},
      {"ThinkAnswerMissingAnswer", Pattern(kThinkAnswer), "<think>hmm</think> 4", false},
      {"ThinkAnswerTrailingText", Pattern(kThinkAnswer), "<think>a</think><answer>4</answer> extra",
       false},
      {"DotMatchesNewlineByDefault", Pattern("a.b"), "a\nb", true},
      {"DotAllOff", With(Pattern("a.b"), [](RegexFormatOptions& o) { o.dot_all = false; }), "a\nb",
       false},
      {"SearchFindsInside", Pattern("\\\\boxed\\{"), "so \\boxed{3} done", true},
      {"FullMatchNeedsWholeText",
       With(Pattern("\\d+"), [](RegexFormatOptions& o) { o.full_match = true; }), "answer 42",
       false},
      {"FullMatchWholeText",
       With(Pattern("\\d+"), [](RegexFormatOptions& o) { o.full_match = true; }), "42", true},
      {"FullMatchAlternationIsAnchored",
       With(Pattern("a|b"), [](RegexFormatOptions& o) { o.full_match = true; }), "ab", false},
      {"CaseSensitiveByDefault", Pattern("ANSWER"), "answer: 3", false},
      {"IgnoreCase", With(Pattern("ANSWER"), [](RegexFormatOptions& o) { o.ignore_case = true; }),
       "answer: 3", true},
      {"CaretIsTextStartByDefault", Pattern("^Answer"), "x\nAnswer: 3", false},
      {"Multiline", With(Pattern("^Answer"), [](RegexFormatOptions& o) { o.multiline = true; }),
       "x\nAnswer: 3", true},
      {"Utf8Character", Pattern("^.$"), "é", true},
      {"InvalidUtf8IsNotAnError", Pattern("ok"), "ok \xC3", true},
      {"EmptyCompletion", Pattern("x"), "", false},
  };
  return cases;
}

class RegexFormatTableTest : public testing::TestWithParam<RegexCase> {};

TEST_P(RegexFormatTableTest, ScoresAsExpected) {
  const RegexCase& c = GetParam();
  auto reward = RegexFormatReward::Create(c.options);
  ASSERT_TRUE(reward.ok()) << reward.status();
  RewardInput input;
  input.completion = c.completion;
  absl::StatusOr<RewardResult> result = (*reward)->Score(input);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->reward, c.matches ? 1.0 : 0.0);
  EXPECT_EQ(result->sub_scores.at("format"), c.matches ? 1.0 : 0.0);
}

INSTANTIATE_TEST_SUITE_P(Cases, RegexFormatTableTest, testing::ValuesIn(RegexCases()),
                         [](const testing::TestParamInfo<RegexCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(RegexFormatTest, CustomRewardValues) {
  RegexFormatOptions options = Pattern("yes");
  options.match_reward = 0.5;
  options.no_match_reward = -1.0;
  auto reward = RegexFormatReward::Create(options);
  ASSERT_TRUE(reward.ok());
  RewardInput input;
  input.completion = "yes";
  EXPECT_EQ((*reward)->Score(input)->reward, 0.5);
  input.completion = "no";
  EXPECT_EQ((*reward)->Score(input)->reward, -1.0);
}

TEST(RegexFormatTest, BadPatternNamesOffsetAndReason) {
  auto reward = RegexFormatReward::Create(Pattern("(unclosed"));
  ASSERT_FALSE(reward.ok());
  EXPECT_EQ(reward.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reward.status().message(), testing::HasSubstr("(unclosed"));
  EXPECT_THAT(reward.status().message(), testing::HasSubstr("offset 9"));
}

TEST(RegexFormatTest, EmptyPatternIsRejected) {
  EXPECT_FALSE(RegexFormatReward::Create(Pattern("")).ok());
}

TEST(RegexFormatTest, CatastrophicBacktrackingIsAnErrorNotANoMatch) {
  auto reward = RegexFormatReward::Create(Pattern("^(a+)+$"));
  ASSERT_TRUE(reward.ok());
  RewardInput input;
  input.completion = std::string(5000, 'a') + "b";
  absl::StatusOr<RewardResult> result = (*reward)->Score(input);
  // PCRE2's JIT may prove no match quickly; the interpreter hits its match limit. Either way the
  // item is never scored as a silent success.
  if (result.ok()) {
    EXPECT_EQ(result->reward, 0.0);
  } else {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  }
}

}  // namespace
}  // namespace lockstep::rewards
