#include "rewards/local_reward_scorer.h"

#include <algorithm>
#include <cmath>
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

LocalRewardScorer::LocalRewardScorer(std::unique_ptr<Reward> reward, int num_threads)
    : reward_(std::move(reward)) {
  for (int i = 0; i < std::max(num_threads, 1); ++i)
    workers_.emplace_back([this] { WorkerLoop(); });
}

LocalRewardScorer::~LocalRewardScorer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

std::string LocalRewardScorer::name() const {
  return absl::StrCat(reward_->name(), " (in-process)");
}

void LocalRewardScorer::ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.items_sent += static_cast<int64_t>(items.size());
    metrics_.items_in_flight += static_cast<int64_t>(items.size());
    queue_.push_back(Job{std::move(items), std::move(done)});
  }
  work_ready_.notify_one();
}

ClientMetrics LocalRewardScorer::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void LocalRewardScorer::WorkerLoop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      // Drain the queue before stopping: every accepted item gets its outcome.
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::vector<ItemOutcome> outcomes;
    outcomes.reserve(job.items.size());
    int64_t num_scored = 0;
    for (const RewardInput& item : job.items) {
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
    job.done(std::move(outcomes));
  }
}

}  // namespace lockstep::rewards
