#include "rewards/local_reward_scorer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::rewards {

ItemOutcome ScoreOne(const Reward& reward, const RewardInput& input) {
  ItemOutcome outcome;
  absl::StatusOr<RewardResult> result = reward.Score(input);
  if (!result.ok()) {
    outcome.error = absl::StrCat(reward.name(), ": ", result.status().ToString());
    return outcome;
  }
  if (!std::isfinite(result->reward)) {
    outcome.error = absl::StrCat(reward.name(), ": non-finite reward ", result->reward);
    return outcome;
  }
  outcome.ok = true;
  outcome.reward = result->reward;
  outcome.sub_scores = std::move(result->sub_scores);
  return outcome;
}

// The backlog is bounded by the caller: the orchestrator's admission control limits the
// rollouts in flight, and so the batches waiting here.
LocalRewardScorer::LocalRewardScorer(std::unique_ptr<Reward> reward, int num_threads)
    : reward_(std::move(reward)),
      queue_({.num_workers = std::max(num_threads, 1),
              .max_queued = WorkQueueOptions::kBoundedByCaller}) {}

LocalRewardScorer::~LocalRewardScorer() = default;

std::string LocalRewardScorer::name() const {
  return absl::StrCat(reward_->name(), " (in-process)");
}

void LocalRewardScorer::ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) {
  const auto num_items = static_cast<int64_t>(items.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.items_sent += num_items;
    metrics_.items_in_flight += num_items;
  }
  auto batch = std::make_shared<std::vector<RewardInput>>(std::move(items));
  if (queue_.TrySubmit([this, batch, done] { ScoreBatch(*batch, done); })) return;
  // Only while the scorer is being destroyed: the items fail, counted, never dropped.
  std::vector<ItemOutcome> outcomes(batch->size());
  for (ItemOutcome& outcome : outcomes) outcome.error = name() + ": scorer is shutting down";
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.items_failed += num_items;
    metrics_.items_in_flight -= num_items;
  }
  done(std::move(outcomes));
}

ClientMetrics LocalRewardScorer::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void LocalRewardScorer::ScoreBatch(const std::vector<RewardInput>& items,
                                   const ScoreDoneCallback& done) {
  std::vector<ItemOutcome> outcomes;
  outcomes.reserve(items.size());
  int64_t num_scored = 0;
  for (const RewardInput& item : items) {
    outcomes.push_back(ScoreOne(*reward_, item));
    if (outcomes.back().ok) ++num_scored;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto num_items = static_cast<int64_t>(outcomes.size());
    metrics_.items_scored += num_scored;
    metrics_.items_failed += num_items - num_scored;
    metrics_.items_in_flight -= num_items;
  }
  done(std::move(outcomes));
}

}  // namespace lockstep::rewards
