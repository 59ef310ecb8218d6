// code_tests over `lockstep serve sandbox`: the reward's sandbox address and a job's
// `[rewards] sandbox_address` send every test run to the service (its counters prove it), and a
// service that is unreachable or refuses the token makes the item failed and counted, never a
// silent 0. Real service on a loopback port, real gRPC, real sandbox.
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/free_port.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/config.h"
#include "orchestrator/reward_pipeline.h"
#include "rewards/reward_registry.h"
#include "sandbox/sandbox_client.h"
#include "tests/sandbox/served_sandbox.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using sandbox::testing::kToken;
using sandbox::testing::ServedSandbox;

constexpr char kSumTests[] =
    R"([{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4", "output": "6"},
        {"input": "5 5\n", "output": "10"}])";
constexpr char kRightProgram[] =
    "```python\na, b = map(int, input().split())\nprint(a + b)\n```";
constexpr char kWrongProgram[] =
    "```python\na, b = map(int, input().split())\nprint(a - b)\n```";

rewards::RewardInput Item(const std::string& completion) {
  rewards::RewardInput input;
  input.completion = completion;
  input.metadata["tests"] = kSumTests;
  return input;
}

// The job config of a code RL recipe, with `rewards_extra` appended to its [rewards] table.
orchestrator::JobConfig CodeJobConfig(const std::string& rewards_extra) {
  const std::string text = absl::StrCat(
      "[model]\npreset = \"tiny\"\n\n[data]\ntask = \"arithmetic\"\n\n"
      "[rewards]\nbuiltin = \"code_tests\"\n",
      rewards_extra);
  absl::StatusOr<orchestrator::JobConfig> config =
      orchestrator::ParseJobConfig(text, "code.toml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : orchestrator::JobConfig();
}

// Scores `items` through the job's reward pipeline, as the RL loop does.
std::vector<rewards::ItemOutcome> ScoreThroughPipeline(const orchestrator::JobConfig& config,
                                                       std::vector<rewards::RewardInput> items,
                                                       rewards::ClientMetrics* metrics) {
  absl::StatusOr<std::unique_ptr<orchestrator::WeightedRewardScorer>> pipeline =
      orchestrator::MakeRewardPipeline(config.rewards, {}, kToken);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  if (!pipeline.ok()) return {};
  std::promise<std::vector<rewards::ItemOutcome>> promise;
  (*pipeline)->ScoreAsync(std::move(items), [&](std::vector<rewards::ItemOutcome> outcomes) {
    promise.set_value(std::move(outcomes));
  });
  std::vector<rewards::ItemOutcome> outcomes = promise.get_future().get();
  *metrics = (*pipeline)->metrics();
  return outcomes;
}

std::string DeadAddress() {
  absl::StatusOr<int> port = PickFreePort();
  EXPECT_TRUE(port.ok()) << port.status();
  return absl::StrCat("127.0.0.1:", port.ok() ? *port : 1);
}

TEST(RemoteCodeTestsTest, RewardWithSandboxAddressRunsEveryTestOnTheService) {
  ServedSandbox served({.token = kToken});
  rewards::BuiltinContext context;
  context.connect_sandbox = [](const std::string& address) {
    return sandbox::ConnectSandbox(address, kToken);
  };
  absl::StatusOr<std::unique_ptr<rewards::Reward>> reward = rewards::CreateBuiltinReward(
      "code_tests", {{"sandbox_address", served.address()}}, context);
  ASSERT_TRUE(reward.ok()) << reward.status();

  absl::StatusOr<rewards::RewardResult> right = (*reward)->Score(Item(kRightProgram));
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_DOUBLE_EQ(right->reward, 1.0);
  EXPECT_DOUBLE_EQ(right->sub_scores.at("verdict_ok"), 3);
  EXPECT_EQ(served.service().num_executed(), 3);

  absl::StatusOr<rewards::RewardResult> wrong = (*reward)->Score(Item(kWrongProgram));
  ASSERT_TRUE(wrong.ok()) << wrong.status();  // a wrong program is a legitimate 0
  EXPECT_DOUBLE_EQ(wrong->reward, 0.0);
  EXPECT_EQ(served.service().num_executed(), 6);
}

TEST(RemoteCodeTestsTest, JobConfigSandboxAddressRoutesCodeTestsToTheService) {
  ServedSandbox served({.token = kToken});
  const orchestrator::JobConfig config =
      CodeJobConfig(absl::StrCat("sandbox_address = \"", served.address(), "\"\n"));
  EXPECT_EQ(config.rewards.sandbox_address, served.address());
  EXPECT_THAT(orchestrator::ResolvedConfigToml(config),
              HasSubstr(absl::StrCat("sandbox_address = '", served.address(), "'")));

  rewards::ClientMetrics metrics;
  std::vector<rewards::ItemOutcome> outcomes =
      ScoreThroughPipeline(config, {Item(kRightProgram), Item(kWrongProgram)}, &metrics);
  ASSERT_EQ(outcomes.size(), 2u);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  ASSERT_TRUE(outcomes[1].ok) << outcomes[1].error;
  EXPECT_DOUBLE_EQ(outcomes[0].reward, 1.0);
  EXPECT_DOUBLE_EQ(outcomes[1].reward, 0.0);
  EXPECT_EQ(served.service().num_executed(), 6) << "the tests did not run on the service";

  // Without the key the same job runs its programs in-process: the service sees nothing.
  outcomes = ScoreThroughPipeline(CodeJobConfig(""), {Item(kRightProgram)}, &metrics);
  ASSERT_EQ(outcomes.size(), 1u);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_DOUBLE_EQ(outcomes[0].reward, 1.0);
  EXPECT_EQ(served.service().num_executed(), 6);
}

TEST(RemoteCodeTestsTest, RewardOptionSandboxAddressPassesValidationAndRunsOnTheService) {
  ServedSandbox served({.token = kToken});
  // The reward's own option, validated without reaching the service, then used by the job.
  const orchestrator::JobConfig config =
      CodeJobConfig(absl::StrCat("options = { sandbox_address = \"", served.address(), "\" }\n"));
  EXPECT_TRUE(config.rewards.sandbox_address.empty());
  EXPECT_EQ(served.service().num_executed(), 0) << "validation ran a program";
  rewards::ClientMetrics metrics;
  std::vector<rewards::ItemOutcome> outcomes =
      ScoreThroughPipeline(config, {Item(kRightProgram)}, &metrics);
  ASSERT_EQ(outcomes.size(), 1u);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_DOUBLE_EQ(outcomes[0].reward, 1.0);
  EXPECT_EQ(served.service().num_executed(), 3);
}

TEST(RemoteCodeTestsTest, UnreachableSandboxFailsTheItemAndCountsIt) {
  const std::string dead = DeadAddress();
  const orchestrator::JobConfig config =
      CodeJobConfig(absl::StrCat("sandbox_address = \"", dead, "\"\n"));
  rewards::ClientMetrics metrics;
  std::vector<rewards::ItemOutcome> outcomes =
      ScoreThroughPipeline(config, {Item(kRightProgram), Item(kWrongProgram)}, &metrics);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const rewards::ItemOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.ok) << "scored " << outcome.reward << " with no sandbox reachable";
    EXPECT_THAT(outcome.error, HasSubstr(absl::StrCat("sandbox service ", dead)));
  }
  EXPECT_EQ(metrics.items_sent, 2);
  EXPECT_EQ(metrics.items_failed, 2);
  EXPECT_EQ(metrics.items_scored, 0);
}

TEST(RemoteCodeTestsTest, ServiceRefusingTheJobsTokenFailsTheItem) {
  ServedSandbox served({.token = "another-jobs-token"});
  const orchestrator::JobConfig config =
      CodeJobConfig(absl::StrCat("sandbox_address = \"", served.address(), "\"\n"));
  rewards::ClientMetrics metrics;
  std::vector<rewards::ItemOutcome> outcomes =
      ScoreThroughPipeline(config, {Item(kRightProgram)}, &metrics);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_THAT(outcomes[0].error, HasSubstr("auth"));
  EXPECT_EQ(metrics.items_failed, 1);
  EXPECT_EQ(served.service().stats().accepted, 0);
}

}  // namespace
}  // namespace lockstep
