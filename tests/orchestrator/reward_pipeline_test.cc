// The weighted reward pipeline of `lockstep run` (orchestrator/reward_pipeline.h): the weighted
// sum of its components with their sub-scores, an item failed by any component failed as a
// whole (never a partial sum or 0) with every reason, sent == scored + failed, and a remote
// server that is not there failing its items after the retries; sandbox verdict sub-scores summed
// into the component's summary metrics.
#include "orchestrator/reward_pipeline.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/free_port.h"
#include "gtest/gtest.h"
#include "rewards/local_reward_scorer.h"
#include "rewards/reward_registry.h"

namespace lockstep::orchestrator {
namespace {

// Reward 2 with sub-score "len"; fails the item whose completion is "bad".
class ConstantReward final : public rewards::Reward {
 public:
  absl::string_view name() const override { return "constant"; }
  absl::StatusOr<rewards::RewardResult> Score(const rewards::RewardInput& input) const override {
    if (input.completion == "bad") return absl::InvalidArgumentError("cannot judge 'bad'");
    return rewards::RewardResult{2.0, {{"len", static_cast<double>(input.completion.size())}}};
  }
};

rewards::RewardInput Item(std::string completion, std::string reference) {
  rewards::RewardInput item;
  item.prompt = "1+1=";
  item.completion = std::move(completion);
  item.reference = std::move(reference);
  return item;
}

std::unique_ptr<WeightedRewardScorer> TwoComponents() {
  std::vector<RewardComponent> components;
  components.push_back({"builtin:exact_match", 1.0,
                        std::make_unique<rewards::LocalRewardScorer>(
                            *rewards::RewardRegistry::WithBuiltins().Create("exact_match"))});
  components.push_back(
      {"judge", 0.25,
       std::make_unique<rewards::LocalRewardScorer>(std::make_unique<ConstantReward>())});
  return std::make_unique<WeightedRewardScorer>(std::move(components));
}

TEST(RewardPipelineTest, WeightedSumWithSubScoresAndWholeItemFailure) {
  std::unique_ptr<WeightedRewardScorer> scorer = TwoComponents();
  const std::vector<rewards::ItemOutcome> outcomes =
      scorer->Score({Item("2", "2"), Item("3", "2"), Item("bad", "2")});
  ASSERT_EQ(outcomes.size(), 3u);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_DOUBLE_EQ(outcomes[0].reward, 1.0 * 1.0 + 0.25 * 2.0);
  EXPECT_DOUBLE_EQ(outcomes[0].sub_scores.at("builtin:exact_match"), 1.0);
  EXPECT_DOUBLE_EQ(outcomes[0].sub_scores.at("judge"), 2.0);
  EXPECT_DOUBLE_EQ(outcomes[0].sub_scores.at("judge/len"), 1.0);
  ASSERT_TRUE(outcomes[1].ok);
  EXPECT_DOUBLE_EQ(outcomes[1].reward, 0.5);
  // One component failed: the item fails, naming the component and its reason.
  EXPECT_FALSE(outcomes[2].ok);
  EXPECT_EQ(outcomes[2].reward, 0.0);
  EXPECT_TRUE(absl::StrContains(outcomes[2].error, "judge")) << outcomes[2].error;
  EXPECT_TRUE(absl::StrContains(outcomes[2].error, "cannot judge")) << outcomes[2].error;
  const rewards::ClientMetrics m = scorer->metrics();
  EXPECT_EQ(m.items_sent, 3);
  EXPECT_EQ(m.items_scored, 2);
  EXPECT_EQ(m.items_failed, 1);
  EXPECT_EQ(m.items_in_flight, 0);
  const nlohmann::json components = scorer->ComponentMetricsJson();
  EXPECT_EQ(components["judge"]["items_failed"], 1);
  EXPECT_EQ(components["builtin:exact_match"]["items_scored"], 3);
}

// Reports code_tests-style verdict counts: one "ok" run for "2", one "nonzero_exit" run otherwise;
// fails the item "bad".
class VerdictReward final : public rewards::Reward {
 public:
  absl::string_view name() const override { return "verdicts"; }
  absl::StatusOr<rewards::RewardResult> Score(const rewards::RewardInput& input) const override {
    if (input.completion == "bad") return absl::UnavailableError("sandbox unreachable");
    const bool ok = input.completion == "2";
    return rewards::RewardResult{
        ok ? 1.0 : 0.0, {{"verdict_ok", ok ? 1.0 : 0.0}, {"verdict_nonzero_exit", ok ? 0.0 : 1.0}}};
  }
};

TEST(RewardPipelineTest, SandboxVerdictsOfScoredItemsReachTheSummary) {
  std::vector<RewardComponent> components;
  components.push_back(
      {"builtin:code_tests", 1.0,
       std::make_unique<rewards::LocalRewardScorer>(std::make_unique<VerdictReward>())});
  WeightedRewardScorer scorer(std::move(components));
  scorer.Score({Item("2", ""), Item("3", ""), Item("2", ""), Item("bad", "")});
  const nlohmann::json json = scorer.ComponentMetricsJson().at("builtin:code_tests");
  EXPECT_EQ(json.at("sandbox_executions").get<int64_t>(), 3);
  EXPECT_EQ(json.at("sandbox_verdicts").at("ok").get<int64_t>(), 2);
  EXPECT_EQ(json.at("sandbox_verdicts").at("nonzero_exit").get<int64_t>(), 1);
  // A reward without verdicts says nothing about a sandbox.
  EXPECT_FALSE(TwoComponents()->ComponentMetricsJson().at("judge").contains("sandbox_executions"));
}

TEST(RewardPipelineTest, NoComponentFailsEveryItem) {
  WeightedRewardScorer scorer({});
  const std::vector<rewards::ItemOutcome> outcomes = scorer.Score({Item("2", "2")});
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_EQ(scorer.metrics().items_failed, 1);
}

TEST(RewardPipelineTest, UnreachableServerFailsItsItemsAfterRetries) {
  absl::StatusOr<int> port = PickFreePort();  // nothing listens there
  ASSERT_TRUE(port.ok()) << port.status();
  RewardsSection section;
  section.builtin = "math";
  RewardServerConfig server;
  server.name = "gone";
  server.deadline_ms = 2000;
  server.max_attempts = 2;
  section.servers.push_back(server);
  absl::StatusOr<std::unique_ptr<WeightedRewardScorer>> scorer =
      MakeRewardPipeline(section, {"127.0.0.1:" + std::to_string(*port)}, "token");
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  const std::vector<rewards::ItemOutcome> outcomes =
      (*scorer)->Score({Item("2", "2"), Item("5", "2")});
  for (const rewards::ItemOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.ok);
    EXPECT_TRUE(absl::StrContains(outcome.error, "gone")) << outcome.error;
  }
  const nlohmann::json components = (*scorer)->ComponentMetricsJson();
  EXPECT_EQ(components["gone"]["items_failed"], 2);
  EXPECT_EQ(components["gone"]["rpcs"], 2);  // the first attempt and one retry
  EXPECT_EQ(components["builtin:math"]["items_scored"], 2);
  const rewards::ClientMetrics m = (*scorer)->metrics();
  EXPECT_EQ(m.items_sent, m.items_scored + m.items_failed);
  EXPECT_EQ(m.items_failed, 2);
}

TEST(RewardPipelineTest, AddressCountMustMatchTheServers) {
  RewardsSection section;
  section.servers.push_back(RewardServerConfig{});
  EXPECT_FALSE(MakeRewardPipeline(section, {}, "").ok());
}

}  // namespace
}  // namespace lockstep::orchestrator
