// The code_tests reward over the real sandbox: stdin/stdout and assert-style tests, partial
// credit and all-or-nothing, wrong/crashing/timed-out programs as legitimate zeros with their
// verdicts counted, and a sandbox that fails making the item failed (never a silent 0).
#include "rewards/code_tests.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/local_reward_scorer.h"
#include "rewards/reward_registry.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::rewards {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<sandbox::Executor> RealSandbox() {
  return std::shared_ptr<sandbox::Executor>(&sandbox::testing::SharedSandbox(true),
                                            [](sandbox::Executor*) {});
}

std::unique_ptr<CodeTestsReward> MakeReward(CodeTestsOptions options = {},
                                            std::shared_ptr<sandbox::Executor> executor = nullptr) {
  absl::StatusOr<std::unique_ptr<CodeTestsReward>> reward =
      CodeTestsReward::Create(std::move(options), executor ? executor : RealSandbox());
  EXPECT_TRUE(reward.ok()) << reward.status();
  return reward.ok() ? *std::move(reward) : nullptr;
}

RewardInput Item(std::string completion, std::string tests) {
  RewardInput input;
  input.completion = std::move(completion);
  input.metadata["tests"] = std::move(tests);
  return input;
}

constexpr char kSumTests[] =
    R"([{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4", "output": "6"},
        {"input": "0 0\n", "output": "0"}, {"input": "7 8\n", "output": "15\n"}])";

TEST(CodeTestsTest, StdinStdoutAllPassWithWhitespaceNormalised) {
  std::unique_ptr<CodeTestsReward> reward = MakeReward();
  absl::StatusOr<RewardResult> result = reward->Score(Item(
      "Here is my answer:\n```python\na, b = map(int, input().split())\nprint(a + b, '  ')\n```\n",
      kSumTests));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->reward, 1.0);
  EXPECT_DOUBLE_EQ(result->sub_scores.at("passed"), 1.0);
  EXPECT_DOUBLE_EQ(result->sub_scores.at("tests"), 4);
  EXPECT_DOUBLE_EQ(result->sub_scores.at("verdict_ok"), 4);
  EXPECT_DOUBLE_EQ(result->sub_scores.at("test_3"), 1.0);
}

TEST(CodeTestsTest, PartialCreditAndAllOrNothing) {
  // Right only when the sum is non-negative and below 10.
  const std::string program =
      "a, b = map(int, input().split())\nprint(a + b if 0 <= a + b < 10 else 'no')\n";
  absl::StatusOr<RewardResult> partial = MakeReward()->Score(Item(program, kSumTests));
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_DOUBLE_EQ(partial->reward, 0.75);
  EXPECT_DOUBLE_EQ(partial->sub_scores.at("test_3"), 0.0);
  CodeTestsOptions strict;
  strict.all_or_nothing = true;
  absl::StatusOr<RewardResult> all = MakeReward(strict)->Score(Item(program, kSumTests));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_DOUBLE_EQ(all->reward, 0.0);
  EXPECT_DOUBLE_EQ(all->sub_scores.at("passed"), 0.75);
}

TEST(CodeTestsTest, AppsInputsOutputsFormat) {
  absl::StatusOr<RewardResult> result = MakeReward()->Score(
      Item("print(int(input()) * 2)", R"({"inputs": ["2\n", "5\n"], "outputs": ["4\n", 10]})"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->reward, 1.0);
}

TEST(CodeTestsTest, AssertStyleTestsScoreEachAssert) {
  const std::string tests =
      R"({"asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 5"]})";
  absl::StatusOr<RewardResult> result =
      MakeReward()->Score(Item("```py\ndef add(a, b):\n    return a + b\n```", tests));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->reward, 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(result->sub_scores.at("verdict_ok"), 2);
  EXPECT_DOUBLE_EQ(result->sub_scores.at("verdict_nonzero_exit"), 1);
}

TEST(CodeTestsTest, HumanEvalCheckFormat) {
  const std::string tests =
      R"({"test": "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n    assert candidate([]) == 0\n", "entry_point": "total"})";
  absl::StatusOr<RewardResult> right =
      MakeReward()->Score(Item("def total(xs):\n    return sum(xs)\n", tests));
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_DOUBLE_EQ(right->reward, 1.0);
  absl::StatusOr<RewardResult> wrong =
      MakeReward()->Score(Item("def total(xs):\n    return len(xs)\n", tests));
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_DOUBLE_EQ(wrong->reward, 0.0);
}

TEST(CodeTestsTest, CrashesAndTimeoutsAreLegitimateZeros) {
  CodeTestsOptions options;
  options.limits.wall_ms = 500;
  std::unique_ptr<CodeTestsReward> reward = MakeReward(options);
  absl::StatusOr<RewardResult> timeout = reward->Score(
      Item("import time\ntime.sleep(30)", R"([{"input": "", "output": "x"}])"));
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_DOUBLE_EQ(timeout->reward, 0.0);
  EXPECT_DOUBLE_EQ(timeout->sub_scores.at("verdict_timeout"), 1);
  absl::StatusOr<RewardResult> crash =
      reward->Score(Item("raise ValueError('no')", R"([{"input": "", "output": "x"}])"));
  ASSERT_TRUE(crash.ok()) << crash.status();
  EXPECT_DOUBLE_EQ(crash->reward, 0.0);
  EXPECT_DOUBLE_EQ(crash->sub_scores.at("verdict_nonzero_exit"), 1);
  absl::StatusOr<RewardResult> empty = reward->Score(Item("", R"([{"input": "", "output": "x"}])"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_DOUBLE_EQ(empty->reward, 0.0);
}

TEST(CodeTestsTest, CppCompileErrorFailsEveryTestOnce) {
  CodeTestsOptions options;
  options.language = "cpp";
  std::unique_ptr<CodeTestsReward> reward = MakeReward(options);
  absl::StatusOr<RewardResult> broken =
      reward->Score(Item("```cpp\nint main() { return nope; }\n```", kSumTests));
  ASSERT_TRUE(broken.ok()) << broken.status();
  EXPECT_DOUBLE_EQ(broken->reward, 0.0);
  EXPECT_DOUBLE_EQ(broken->sub_scores.at("verdict_compile_error"), 4);
  absl::StatusOr<RewardResult> right = reward->Score(Item(
      "```c++\n#include <cstdio>\nint main() { long a, b; scanf(\"%ld %ld\", &a, &b); "
      "printf(\"%ld\\n\", a + b); }\n```",
      kSumTests));
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_DOUBLE_EQ(right->reward, 1.0);
}

TEST(CodeTestsTest, ASandboxErrorFailsTheItemAndIsCounted) {
  // A real sandbox whose interpreter is missing: every run is a sandbox_error.
  sandbox::SandboxOptions broken;
  broken.python3_path = "/usr/bin/no-such-python3";
  absl::StatusOr<std::unique_ptr<sandbox::Sandbox>> box = sandbox::Sandbox::Create(broken);
  ASSERT_TRUE(box.ok()) << box.status();
  std::shared_ptr<sandbox::Executor> executor = *std::move(box);
  std::unique_ptr<CodeTestsReward> reward = MakeReward({}, executor);
  const RewardInput item = Item("print(3)", kSumTests);
  absl::StatusOr<RewardResult> result = reward->Score(item);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("sandbox_error"));
  // The scorer reports it as failed, with the reason, not as a reward of 0.
  ItemOutcome outcome = ScoreOne(*reward, item);
  EXPECT_FALSE(outcome.ok);
  EXPECT_THAT(outcome.error, HasSubstr("sandbox_error"));
}

TEST(CodeTestsTest, BadTestsAreErrors) {
  std::unique_ptr<CodeTestsReward> reward = MakeReward();
  RewardInput no_tests;
  no_tests.completion = "print(1)";
  EXPECT_THAT(reward->Score(no_tests).status().message(), HasSubstr("no metadata \"tests\""));
  EXPECT_THAT(reward->Score(Item("x", "not json")).status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(reward->Score(Item("x", "[]")).status().message(), HasSubstr("empty"));
  EXPECT_THAT(reward->Score(Item("x", R"([{"input": "1"}])")).status().message(),
              HasSubstr("[0] must be"));
}

TEST(CodeTestsTest, ExtractsTheLastBlockInTheLanguage) {
  const std::string completion =
      "```python\nfirst\n```\ntext\n```bash\nshell\n```\n```Python3\nsecond\n```\ntrailing";
  EXPECT_EQ(ExtractProgram(completion, "python3"), "second\n");
  EXPECT_EQ(ExtractProgram(completion, "bash"), "shell\n");
  EXPECT_EQ(ExtractProgram(completion, "cpp"), completion);  // no cpp block: the whole text
  EXPECT_EQ(ExtractProgram("print(1)", "python3"), "print(1)");
  EXPECT_EQ(ExtractProgram("```python\nunclosed", "python3"), "```python\nunclosed");
}

TEST(CodeTestsTest, OutputsMatchAsTokens) {
  EXPECT_TRUE(OutputsMatch("1 2\n3\n", "1 2 3"));
  EXPECT_TRUE(OutputsMatch("  x\r\n", "x"));
  EXPECT_FALSE(OutputsMatch("12", "1 2"));
  EXPECT_FALSE(OutputsMatch("", "0"));
  EXPECT_TRUE(OutputsMatch("", "\n"));
}

TEST(CodeTestsTest, RegistryBuildsItAndNamesBadOptions) {
  absl::StatusOr<std::unique_ptr<Reward>> reward =
      CreateBuiltinReward("code_tests", {{"language", "bash"}, {"all_or_nothing", true}});
  ASSERT_TRUE(reward.ok()) << reward.status();
  absl::StatusOr<RewardResult> result =
      (*reward)->Score(Item("read a; echo $((a+1))", R"([{"input": "41", "output": "42"}])"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->reward, 1.0);
  EXPECT_THAT(CreateBuiltinReward("code_tests", {{"language", "java"}}).status().message(),
              HasSubstr("option \"language\""));
  EXPECT_THAT(CreateBuiltinReward("code_tests", {{"wall_ms", -1}}).status().message(),
              HasSubstr("limits.wall_ms must be positive"));
  EXPECT_THAT(CreateBuiltinReward("code_tests", {{"walltime", 1}}).status().message(),
              HasSubstr("unknown option \"walltime\""));
  EXPECT_THAT(CreateBuiltinReward("code_tests", {{"sandbox_address", "127.0.0.1:1"}})
                  .status()
                  .message(),
              HasSubstr("sandbox client"));
}

}  // namespace
}  // namespace lockstep::rewards
