// Math answer reward on a table of tricky completions: extraction (boxed, ####, last number),
// normalisation (fractions, separators, units, LaTeX) and comparison.
#include "rewards/math_answer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::rewards {
namespace {

struct MathCase {
  const char* name;
  const char* completion;
  const char* reference;
  double reward;
  double format;
};

std::ostream& operator<<(std::ostream& os, const MathCase& c) { return os << c.name; }

const std::vector<MathCase>& MathCases() {
  static const std::vector<MathCase> cases = {
      // \boxed{} extraction
      {"BoxedInteger", "So the answer is \\boxed{42}.", "42", 1, 1},
      {"BoxedWrong", "So the answer is \\boxed{41}.", "42", 0, 1},
      {"BoxedNestedFrac", "$\\boxed{\\frac{1}{2}}$", "1/2", 1, 1},
      {"BoxedNestedBracesSqrtShorthand", "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", 1,
       1},
      {"BoxedNestedBracesSameSpelling", "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}", 1,
       1},
      {"LastBoxWins", "First \\boxed{3}, then corrected: \\boxed{5}", "5", 1, 1},
      {"LastBoxWinsWrong", "First \\boxed{5}, then corrected: \\boxed{3}", "5", 0, 1},
      {"BoxedBeatsLaterNumber", "\\boxed{7} (checked with 3 cases)", "7", 1, 1},
      {"UnclosedBoxIgnored", "\\boxed{12} and then \\boxed{13", "12", 1, 1},
      {"BoxedSpaceForm", "The answer is \\boxed 9", "9", 1, 1},
      {"FboxAccepted", "\\fbox{8}", "8", 1, 1},
      {"BoxedSet", "\\boxed{\\{1, 2\\}}", "\\{1,2\\}", 1, 1},
      {"BoxedTextChoice", "\\boxed{\\text{(B)}}", "(B)", 1, 1},
      {"BoxedAssignment", "\\boxed{x = 4}", "4", 1, 1},
      {"BoxedDoubleDollars", "$$\\boxed{10}$$", "10", 1, 1},
      // GSM8K "####"
      {"HashesInteger", "Janet has 3 + 4 = 7 eggs.\n#### 7", "7", 1, 1},
      {"HashesReferenceSolution", "\\boxed{72}", "48 + 24 = 72 clips.\n#### 72", 1, 1},
      {"HashesThousands", "#### 1,000", "1000", 1, 1},
      {"HashesDollar", "#### $18", "18", 1, 1},
      {"HashesBeatLastNumber", "#### 10\nThat took 5 steps.", "10", 1, 1},
      {"HashesWrong", "#### 11", "#### 10", 0, 1},
      // Last number fallback
      {"LastNumberPlain", "She has 3 apples and buys 4 more, so 7", "7", 1, 1},
      {"LastNumberWithPeriod", "The total is 12.", "12", 1, 1},
      {"LastNumberDecimal", "It costs 2.50 dollars", "2.5", 1, 1},
      {"LastNumberNegative", "The temperature is -5 degrees", "-5", 1, 1},
      {"LastNumberBinaryMinusNotSign", "3-5", "5", 1, 1},
      {"LastNumberThousands", "They sold 1,234 tickets", "1234", 1, 1},
      {"LastNumberListNotThousands", "The values are 1,2", "2", 1, 1},
      {"LastNumberFraction", "Half of it: 1/2", "0.5", 1, 1},
      {"LastNumberIsNotFirst", "7 is wrong; the answer is 8", "7", 0, 1},
      // No answer at all
      {"NoAnswer", "I don't know.", "5", 0, 0},
      {"EmptyCompletion", "", "5", 0, 0},
      {"EmptyBox", "\\boxed{}", "5", 0, 0},
      // Numbers: integers, decimals, signs, separators
      {"TrailingPointZero", "\\boxed{5.0}", "5", 1, 1},
      {"TrailingZeros", "\\boxed{2.500}", "2.5", 1, 1},
      {"LeadingZero", "\\boxed{.5}", "0.5", 1, 1},
      {"LeadingPlus", "\\boxed{+3}", "3", 1, 1},
      {"NegativeInteger", "\\boxed{-3}", "-3", 1, 1},
      {"NegativeVsPositive", "\\boxed{-3}", "3", 0, 1},
      {"NegativeZero", "\\boxed{-0}", "0", 1, 1},
      {"UnicodeMinus",
       "\\boxed{\xE2\x88\x92"
       "2}",
       "-2", 1, 1},
      {"ThousandsVsPlain", "\\boxed{1,000}", "1000", 1, 1},
      {"ThousandsMillions", "\\boxed{1,234,567}", "1234567", 1, 1},
      {"LatexThousands", "\\boxed{1{,}000}", "1000", 1, 1},
      {"LargeIntegersExact", "\\boxed{1000001}", "1000000", 0, 1},
      {"DecimalNotInteger", "\\boxed{0.3}", "0.33", 0, 1},
      // Fractions
      {"FracVsDecimal", "\\boxed{\\frac{3}{4}}", "0.75", 1, 1},
      {"DfracVsSlash", "\\boxed{\\dfrac{3}{4}}", "3/4", 1, 1},
      {"TfracShorthand", "\\boxed{\\tfrac12}", "0.5", 1, 1},
      {"NegativeFrac", "\\boxed{-\\frac{1}{2}}", "-0.5", 1, 1},
      {"NegativeNumerator", "\\boxed{\\frac{-1}{2}}", "-\\frac{1}{2}", 1, 1},
      {"UnreducedFraction", "\\boxed{2/4}", "\\frac{1}{2}", 1, 1},
      {"MixedNumber", "\\boxed{1\\frac{1}{2}}", "3/2", 1, 1},
      {"RepeatingDecimalTooShort", "\\boxed{0.333}", "\\frac{1}{3}", 0, 1},
      {"RepeatingDecimalLong", "\\boxed{0.3333333333333}", "\\frac{1}{3}", 1, 1},
      {"FracWrong", "\\boxed{\\frac{2}{3}}", "\\frac{3}{4}", 0, 1},
      // Units and wrappers
      {"PercentLatex", "\\boxed{50\\%}", "50", 1, 1},
      {"PercentPlain", "#### 25%", "25", 1, 1},
      {"PercentIsNotFraction", "\\boxed{50\\%}", "0.5", 0, 1},
      {"DollarUnit", "\\boxed{\\$18.00}", "18", 1, 1},
      {"TextUnit", "\\boxed{5 \\text{ cm}}", "5", 1, 1},
      {"TextUnitBothSides", "\\boxed{12\\text{ meters}}", "12 \\text{m}", 1, 1},
      {"MathrmUnit", "\\boxed{3\\,\\mathrm{kg}}", "3", 1, 1},
      {"DegreeSign", "\\boxed{90^\\circ}", "90", 1, 1},
      {"DegreeBraces", "\\boxed{90^{\\circ}}", "90", 1, 1},
      {"SpacesAndDollars", "  $ 42 $  ", "42", 1, 1},
      {"InlineMathParens", "#### \\( 7 \\)", "7", 1, 1},
      {"WordUnitInHashes", "#### 15 apples", "15", 1, 1},
      {"LeftRight", "\\boxed{\\left(1,2\\right)}", "(1, 2)", 1, 1},
      // Non-numeric answers compare as normalised strings
      {"SqrtSame", "\\boxed{2\\sqrt{2}}", "2\\sqrt{2}", 1, 1},
      {"PiExpression", "\\boxed{\\frac{\\pi}{2}}", "\\dfrac{\\pi}{2}", 1, 1},
      {"IntervalDiffers", "\\boxed{[0, 1)}", "[0,1]", 0, 1},
      {"TextWord", "\\boxed{\\text{Monday}}", "Monday", 1, 1},
      {"SqrtDiffers", "\\boxed{\\sqrt{2}}", "\\sqrt3", 0, 1},
      {"DollarWithLatexThousands", "\\boxed{\\$1{,}234.56}", "1234.56", 1, 1},
      {"ThinSpaceThousands", "\\boxed{100\\,000}", "100000", 1, 1},
      {"MboxUnit", "\\boxed{12 \\mbox{ inches}}", "12", 1, 1},
      {"WordAfterMath", "#### $1,234$ dollars", "1234", 1, 1},
      {"AnswerIsColon", "The answer is: 3", "3", 1, 1},
      {"AssignmentBeforeBox", "x = \\boxed{3}", "3", 1, 1},
      {"TrailingPeriodAfterMath", "so $x=-2$.", "-2", 1, 1},
  };
  return cases;
}

class MathAnswerTableTest : public testing::TestWithParam<MathCase> {};

TEST_P(MathAnswerTableTest, ScoresAsExpected) {
  const MathCase& c = GetParam();
  absl::StatusOr<std::unique_ptr<MathAnswerReward>> reward = MathAnswerReward::Create({});
  ASSERT_TRUE(reward.ok()) << reward.status();
  RewardInput input;
  input.completion = c.completion;
  input.reference = c.reference;
  absl::StatusOr<RewardResult> result = (*reward)->Score(input);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->reward, c.reward)
      << "completion: " << c.completion << "\nreference: " << c.reference;
  EXPECT_EQ(result->sub_scores.at("format"), c.format);
}

INSTANTIATE_TEST_SUITE_P(Cases, MathAnswerTableTest, testing::ValuesIn(MathCases()),
                         [](const testing::TestParamInfo<MathCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(MathAnswerTest, TableHasAtLeastFiftyCases) { EXPECT_GE(MathCases().size(), 50u); }

TEST(MathAnswerTest, ExtractReportsTheSource) {
  EXPECT_EQ(ExtractMathAnswer("x \\boxed{1} #### 2")->source, AnswerSource::kBoxed);
  EXPECT_EQ(ExtractMathAnswer("x #### 2")->source, AnswerSource::kHashes);
  EXPECT_EQ(ExtractMathAnswer("x 2")->source, AnswerSource::kLastNumber);
  EXPECT_FALSE(ExtractMathAnswer("x 2", /*use_last_number=*/false).has_value());
}

TEST(MathAnswerTest, NormalizesToCanonicalSpelling) {
  EXPECT_EQ(NormalizeMathAnswer("1,234.50"), "1234.5");
  EXPECT_EQ(NormalizeMathAnswer("\\dfrac{3}{4}"), "3/4");
  EXPECT_EQ(NormalizeMathAnswer("-\\frac12"), "-1/2");
  EXPECT_EQ(NormalizeMathAnswer("$007$"), "7");
  EXPECT_EQ(NormalizeMathAnswer("\\text{ Yes }"), "Yes");
  EXPECT_EQ(NormalizeMathAnswer("  "), "");
}

TEST(MathAnswerTest, ValueOfFractionsAndMixedNumbers) {
  EXPECT_DOUBLE_EQ(*MathAnswerValue("\\frac{3}{4}"), 0.75);
  EXPECT_DOUBLE_EQ(*MathAnswerValue("-2\\frac{1}{4}"), -2.25);
  EXPECT_FALSE(MathAnswerValue("\\sqrt{2}").has_value());
  EXPECT_FALSE(MathAnswerValue("1/0").has_value());
}

TEST(MathAnswerTest, ToleranceIsAnOption) {
  EXPECT_FALSE(MathAnswersMatch("0.333", "1/3"));
  EXPECT_TRUE(MathAnswersMatch("0.333", "1/3", /*tolerance=*/1e-3));
}

TEST(MathAnswerTest, LastNumberFallbackCanBeDisabled) {
  auto reward = MathAnswerReward::Create({.tolerance = 1e-9, .use_last_number = false});
  ASSERT_TRUE(reward.ok());
  absl::StatusOr<RewardResult> result = (*reward)->Score({.completion = "so 7", .reference = "7"});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->reward, 0.0);
  EXPECT_EQ(result->sub_scores.at("format"), 0.0);
}

TEST(MathAnswerTest, EmptyReferenceIsAnErrorNotAZero) {
  auto reward = MathAnswerReward::Create({});
  ASSERT_TRUE(reward.ok());
  absl::StatusOr<RewardResult> result = (*reward)->Score({.completion = "\\boxed{1}"});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MathAnswerTest, RejectsBadTolerance) {
  EXPECT_FALSE(MathAnswerReward::Create({.tolerance = -1.0}).ok());
  EXPECT_FALSE(MathAnswerReward::Create({.tolerance = 1.0}).ok());
}

}  // namespace
}  // namespace lockstep::rewards
