#include "rewards/reward_scorer.h"

#include <future>
#include <utility>

namespace lockstep::rewards {

std::vector<ItemOutcome> RewardScorer::Score(std::vector<RewardInput> items) {
  std::promise<std::vector<ItemOutcome>> promise;
  std::future<std::vector<ItemOutcome>> outcomes = promise.get_future();
  ScoreAsync(std::move(items),
             [&promise](std::vector<ItemOutcome> result) { promise.set_value(std::move(result)); });
  return outcomes.get();
}

}  // namespace lockstep::rewards
