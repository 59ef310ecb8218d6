#include "rewards/reward_registry.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::rewards {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

absl::StatusOr<RewardResult> ScoreWith(const Reward& reward, const std::string& completion,
                                       const std::string& reference = "") {
  RewardInput input;
  input.completion = completion;
  input.reference = reference;
  return reward.Score(input);
}

TEST(RewardRegistryTest, ListsBuiltins) {
  EXPECT_THAT(RewardRegistry::WithBuiltins().names(),
              ElementsAre("code_tests", "exact_match", "length_penalty", "math", "regex", "rubric"));
}

TEST(RewardRegistryTest, CreatesEachBuiltinWithDefaults) {
  for (const char* name : {"math", "exact_match"}) {
    absl::StatusOr<std::unique_ptr<Reward>> reward = CreateBuiltinReward(name);
    ASSERT_TRUE(reward.ok()) << name << ": " << reward.status();
    EXPECT_EQ((*reward)->name(), name);
  }
  EXPECT_TRUE(CreateBuiltinReward("math", json()).ok());  // null options mean {}
}

TEST(RewardRegistryTest, OptionsReachTheReward) {
  auto math = CreateBuiltinReward("math", {{"use_last_number", false}});
  ASSERT_TRUE(math.ok()) << math.status();
  EXPECT_EQ(ScoreWith(**math, "so 7", "7")->reward, 0.0);

  auto exact = CreateBuiltinReward("exact_match", {{"ignore_case", true}});
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(ScoreWith(**exact, "PARIS", "paris")->reward, 1.0);

  auto regex = CreateBuiltinReward(
      "regex", {{"pattern", "^\\d+$"}, {"full_match", true}, {"no_match_reward", -1}});
  ASSERT_TRUE(regex.ok()) << regex.status();
  EXPECT_EQ(ScoreWith(**regex, "123")->reward, 1.0);
  EXPECT_EQ(ScoreWith(**regex, "12a")->reward, -1.0);

  auto length = CreateBuiltinReward(
      "length_penalty", {{"max_length", 2}, {"unit", "words"}, {"penalty_per_unit", 0.5}});
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(ScoreWith(**length, "a b c")->reward, -0.5);
}

TEST(RewardRegistryTest, RubricFromJson) {
  const json options = json::parse(R"({
    "components": [
      {"name": "correct", "reward": "math", "weight": 1.0},
      {"name": "format", "reward": "regex", "weight": 0.5,
       "options": {"pattern": "\\\\boxed\\{"}},
      {"name": "length", "reward": "length_penalty",
       "options": {"max_length": 10, "penalty_per_unit": 0.01}}
    ]})");
  auto rubric = CreateBuiltinReward("rubric", options);
  ASSERT_TRUE(rubric.ok()) << rubric.status();
  // 24 characters: 14 over the band -> length penalty -0.14.
  absl::StatusOr<RewardResult> result = ScoreWith(**rubric, "The answer is \\boxed{4}.", "4");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->reward, 1.0 + 0.5 - 0.14, 1e-12);
  EXPECT_EQ(result->sub_scores.at("correct"), 1.0);
  EXPECT_EQ(result->sub_scores.at("correct/format"), 1.0);
  EXPECT_EQ(result->sub_scores.at("format"), 1.0);
  EXPECT_EQ(result->sub_scores.at("length/length"), 24.0);
}

struct BadOptionsCase {
  const char* reward;
  const char* options;
  const char* message;  // must appear in the error
};

TEST(RewardRegistryTest, ErrorsNameTheBadOption) {
  const BadOptionsCase cases[] = {
      {"math", R"({"tolerence": 1e-6})", "reward \"math\": unknown option \"tolerence\""},
      {"math", R"({"tolerance": "small"})", "option \"tolerance\" must be a number"},
      {"math", R"({"tolerance": 2})", "tolerance must be in [0, 1)"},
      {"math", R"([1, 2])", "options must be a JSON object"},
      {"exact_match", R"({"ignore_case": 1})", "option \"ignore_case\" must be true or false"},
      {"regex", R"({})", "missing required option \"pattern\""},
      {"regex", R"({"pattern": "("})", "does not compile"},
      {"regex", R"({"pattern": "x", "dotall": true})", "unknown option \"dotall\""},
      {"length_penalty", R"({"max_length": 1.5})", "option \"max_length\" must be an integer"},
      {"length_penalty", R"({"max_length": 5, "unit": "bytes"})", "option \"unit\""},
      {"length_penalty", R"({"min_length": 3})", "missing required option \"max_length\""},
      {"rubric", R"({})", "missing required option \"components\""},
      {"rubric", R"({"components": []})", "non-empty array"},
      {"rubric", R"({"components": [{"name": "a"}]})", "missing required option \"reward\""},
      {"rubric", R"({"components": [{"name": "a", "reward": "nope"}]})", "unknown reward \"nope\""},
      {"rubric", R"({"components": [{"name": "a", "reward": "math", "options": {"x": 1}}]})",
       "rubric component \"a\": reward \"math\": unknown option \"x\""},
  };
  for (const BadOptionsCase& c : cases) {
    SCOPED_TRACE(std::string(c.reward) + " " + c.options);
    absl::StatusOr<std::unique_ptr<Reward>> reward =
        CreateBuiltinReward(c.reward, json::parse(c.options));
    ASSERT_FALSE(reward.ok());
    EXPECT_THAT(std::string(reward.status().message()), HasSubstr(c.message));
  }
}

TEST(RewardRegistryTest, UnknownRewardListsKnownOnes) {
  auto reward = CreateBuiltinReward("maths");
  ASSERT_FALSE(reward.ok());
  EXPECT_EQ(reward.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(reward.status().message()), HasSubstr("known: code_tests, exact_match"));
}

TEST(RewardRegistryTest, RegistersCustomRewardsUsableInRubrics) {
  RewardRegistry registry = RewardRegistry::WithBuiltins();
  ASSERT_TRUE(registry
                  .Register("always_one",
                            [](const json&) -> absl::StatusOr<std::unique_ptr<Reward>> {
                              return CreateBuiltinReward("regex", {{"pattern", ""}});
                            })
                  .ok());
  EXPECT_EQ(registry.Register("math", nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      registry.Register("rubric", [](const json&) { return CreateBuiltinReward("math"); }).code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(
      registry.Register("math", [](const json&) { return CreateBuiltinReward("math"); }).code(),
      absl::StatusCode::kAlreadyExists);
  // The custom factory's own error surfaces through the rubric.
  auto rubric = registry.Create(
      "rubric", json::parse(R"({"components": [{"name": "c", "reward": "always_one"}]})"));
  ASSERT_FALSE(rubric.ok());
  EXPECT_THAT(std::string(rubric.status().message()), HasSubstr("pattern is empty"));
}

TEST(RewardRegistryTest, ConcurrentScoringMatchesSequential) {
  // Every built-in in one rubric, scored from several threads at once (Score is const and
  // documented thread-safe; the regex shares one JIT-compiled pattern).
  auto rubric = CreateBuiltinReward("rubric", json::parse(R"({"components": [
      {"name": "math", "reward": "math"},
      {"name": "exact", "reward": "exact_match", "options": {"ignore_case": true}},
      {"name": "format", "reward": "regex", "options": {"pattern": "\\\\boxed\\{(\\d+)\\}"}},
      {"name": "length", "reward": "length_penalty", "options": {"max_length": 12}}]})"));
  ASSERT_TRUE(rubric.ok()) << rubric.status();
  std::vector<RewardInput> inputs;
  for (int i = 0; i < 64; ++i) {
    RewardInput input;
    input.completion = i % 3 == 0 ? absl::StrCat("so \\boxed{", i, "}") : absl::StrCat("maybe ", i);
    input.reference = absl::StrCat(i % 2 == 0 ? i : i + 1);
    inputs.push_back(input);
  }
  std::vector<RewardResult> expected;
  for (const RewardInput& input : inputs) expected.push_back(*(*rubric)->Score(input));
  constexpr int kNumThreads = 4;
  std::vector<int> mismatches(kNumThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kNumThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          absl::StatusOr<RewardResult> got = (*rubric)->Score(inputs[i]);
          if (!got.ok() || got->reward != expected[i].reward ||
              got->sub_scores != expected[i].sub_scores) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kNumThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace lockstep::rewards
