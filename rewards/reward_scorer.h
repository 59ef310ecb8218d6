// The one interface the orchestrator scores rollouts through, whether the reward runs in-process
// (LocalRewardScorer over a built-in, local_reward_scorer.h) or on a gRPC server in any language
// (RewardClient, reward_client.h). Both are asynchronous: ScoreAsync returns at once and a
// scorer thread later calls `done` with exactly one outcome per item, in order.
//
// Failure policy (shared by every scorer): an item that could not be scored — the server said
// so, its reward was NaN/inf, the call failed after its retries, the response had the wrong
// number of scores — comes back with ok = false and the reason in `error`. It is never turned
// into reward 0; callers exclude it from advantages and count it.
#ifndef LOCKSTEP_REWARDS_REWARD_SCORER_H_
#define LOCKSTEP_REWARDS_REWARD_SCORER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rewards/reward.h"

namespace lockstep::rewards {

// The result for one item. When ok is false, `reward` and `sub_scores` are meaningless (0 and
// empty) and `error` says why.
struct ItemOutcome {
  bool ok = false;
  double reward = 0.0;
  std::map<std::string, double> sub_scores;
  std::string error;
};

// Counters since the scorer was created. Invariants, in every snapshot:
//   items_sent == items_scored + items_failed + items_in_flight
// and items_in_flight == 0 once every `done` of every ScoreAsync has returned (so a quiescent
// caller sees items_sent == items_scored + items_failed). An item is counted once however many
// times its batch was retried.
struct ClientMetrics {
  int64_t items_sent = 0;           // items handed to ScoreAsync
  int64_t items_scored = 0;         // outcomes with ok = true
  int64_t items_failed = 0;         // outcomes with ok = false
  int64_t items_in_flight = 0;      // accepted, outcome not yet delivered
  int64_t rpcs = 0;                 // calls attempted (retries included; 0 for in-process scorers)
  int64_t rpcs_failed = 0;          // attempts that ended in a non-OK status
  int64_t retries = 0;              // attempts after the first one of a batch
  int64_t deadline_exceeded = 0;    // attempts that ran past the deadline
  int64_t max_concurrent_rpcs = 0;  // the most calls ever in flight at once
};

// Called with one outcome per item, in the order the items were given.
using ScoreDoneCallback = std::function<void(std::vector<ItemOutcome>)>;

class RewardScorer {
 public:
  virtual ~RewardScorer() = default;

  // Short description for logs, e.g. "math (in-process)" or "reward server 127.0.0.1:5000".
  virtual std::string name() const = 0;

  // Never blocks on scoring: queues the items and returns. `done` runs exactly once, on a scorer
  // thread (never inside this call), with items.size() outcomes. `done` should be quick (hand
  // the outcomes to a queue); it may call ScoreAsync again. An empty `items` gets an empty
  // vector. Thread-safe.
  virtual void ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) = 0;

  // Blocking convenience: ScoreAsync and wait for its outcomes. Thread-safe; do not call from
  // inside a `done` callback.
  std::vector<ItemOutcome> Score(std::vector<RewardInput> items);

  // A consistent snapshot of the counters. Thread-safe.
  virtual ClientMetrics metrics() const = 0;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REWARD_SCORER_H_
