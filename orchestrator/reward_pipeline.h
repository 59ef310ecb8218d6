// The reward of a sample in `lockstep run`: the weighted sum of the in-process built-in
// ([rewards] builtin, weight) and every remote reward server ([[rewards.servers]], weight),
// behind the one RewardScorer interface the RL loop and the evaluation use.
//
// Failure policy (rewards/reward_scorer.h): an item is scored only when every component scored
// it; if any component failed it (server dead, deadline, NaN, wrong count, refused token ...),
// the item is failed with every component's reason, so the loop leaves it out of the advantages
// and counts it. Never a partial sum, never a silent 0.
//
// Sub-scores of a scored item: "<component>" (that component's reward, before weighting) and
// "<component>/<sub-score>" for each of its own.
//
//   std::unique_ptr<WeightedRewardScorer> scorer = *MakeRewardPipeline(config.rewards,
//                                                                      addresses, token);
//   scorer->ScoreAsync(items, done);    // fans out to every component, joins, combines
//
// Thread safety: ScoreAsync and the metrics accessors are thread-safe; `done` runs on the
// thread of the component that finished last.
#ifndef LOCKSTEP_ORCHESTRATOR_REWARD_PIPELINE_H_
#define LOCKSTEP_ORCHESTRATOR_REWARD_PIPELINE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "orchestrator/config.h"
#include "rewards/reward_scorer.h"

namespace lockstep::orchestrator {

struct RewardComponent {
  std::string name;  // "builtin:math", or the server's name from the config
  double weight = 1.0;
  std::unique_ptr<rewards::RewardScorer> scorer;
};

class WeightedRewardScorer final : public rewards::RewardScorer {
 public:
  explicit WeightedRewardScorer(std::vector<RewardComponent> components);

  std::string name() const override;
  // With no components every item fails ("no reward configured").
  void ScoreAsync(std::vector<rewards::RewardInput> items,
                  rewards::ScoreDoneCallback done) override;
  // Counters of the combined items (items_sent == items_scored + items_failed once quiet);
  // rpcs, retries, deadline_exceeded and rpcs_failed are summed over the components.
  rewards::ClientMetrics metrics() const override;

  // {"<component>": {"weight", "items_sent", "items_scored", "items_failed", "rpcs", "retries",
  // "deadline_exceeded"}, ...}: for summary.json. A component whose items report sandbox
  // verdicts (code_tests' "verdict_<name>" sub-scores) adds "sandbox_executions" (their sum over
  // the scored items) and "sandbox_verdicts" ({"ok": n, "nonzero_exit": n, ...}).
  nlohmann::json ComponentMetricsJson() const;
  size_t num_components() const { return components_.size(); }

 private:
  struct PendingItems;
  // Combines a ScoreAsync's outcomes once every component has answered, and calls its `done`.
  void Finish(PendingItems& pending);

  const std::vector<RewardComponent> components_;
  mutable std::mutex mu_;
  rewards::ClientMetrics metrics_ ABSL_GUARDED_BY(mu_);
  // Per component: "verdict_<name>" sub-scores summed over its scored items.
  std::vector<std::map<std::string, double>> verdict_counts_ ABSL_GUARDED_BY(mu_);
};

// Combines one item's outcomes (one per component, in component order). Exposed for tests.
rewards::ItemOutcome CombineOutcomes(const std::vector<RewardComponent>& components,
                                     const std::vector<const rewards::ItemOutcome*>& outcomes);

// Builds the pipeline: the built-in (when `rewards.builtin` is non-empty) in-process, then one
// RewardClient per server at `server_addresses[i]` (the config's address, or where its command
// serves) with the server's deadline, attempts and concurrency limit and `auth_token`.
absl::StatusOr<std::unique_ptr<WeightedRewardScorer>> MakeRewardPipeline(
    const RewardsSection& rewards, const std::vector<std::string>& server_addresses,
    const std::string& auth_token);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_REWARD_PIPELINE_H_
