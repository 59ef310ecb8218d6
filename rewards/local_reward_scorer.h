// A RewardScorer over an in-process Reward (a built-in or any rewards::Reward), so that the
// orchestrator treats local and remote rewards alike. Items are scored on the scorer's own
// worker threads, never on the caller's; a failed item (error status or non-finite reward) is
// reported as failed with the reason, exactly as RewardClient does.
#ifndef LOCKSTEP_REWARDS_LOCAL_REWARD_SCORER_H_
#define LOCKSTEP_REWARDS_LOCAL_REWARD_SCORER_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/work_queue.h"
#include "rewards/reward.h"
#include "rewards/reward_scorer.h"

namespace lockstep::rewards {

// Scores one item with the failure policy applied: an error status or a non-finite reward gives
// ok = false with the reason. Thread-safe when `reward` is (every Reward is).
ItemOutcome ScoreOne(const Reward& reward, const RewardInput& input);

class LocalRewardScorer final : public RewardScorer {
 public:
  // `num_threads` >= 1 workers score queued batches (one batch per worker at a time).
  explicit LocalRewardScorer(std::unique_ptr<Reward> reward, int num_threads = 1);

  // Scores whatever is still queued (every `done` runs), then joins the workers.
  ~LocalRewardScorer() override;

  LocalRewardScorer(const LocalRewardScorer&) = delete;
  LocalRewardScorer& operator=(const LocalRewardScorer&) = delete;

  std::string name() const override;
  void ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) override;
  ClientMetrics metrics() const override;

 private:
  // Scores one batch on a worker thread and hands the outcomes to `done`.
  void ScoreBatch(const std::vector<RewardInput>& items, const ScoreDoneCallback& done);

  const std::unique_ptr<Reward> reward_;
  mutable std::mutex mu_;
  ClientMetrics metrics_ ABSL_GUARDED_BY(mu_);
  WorkQueue queue_;  // last: its destructor scores what is queued while the rest still exists
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_LOCAL_REWARD_SCORER_H_
