// A reward server for tests that misbehaves on request: slow, refusing, failing the first calls
// with UNAVAILABLE, returning a wrong number of scores. Each item's reward is its completion read
// as a number ("0.5" -> 0.5, "nan" -> NaN, "inf" -> inf, sent as they are), and completion
// "fail" gets an item error, so one batch can mix good and bad items. It counts calls and the
// most calls it ever served at once. Synchronous gRPC API: each call holds a server thread while
// it sleeps, so concurrency is not capped by a callback thread pool.
#ifndef LOCKSTEP_TESTS_REWARDS_FAULT_REWARD_SERVICE_H_
#define LOCKSTEP_TESTS_REWARDS_FAULT_REWARD_SERVICE_H_

#include <atomic>
#include <chrono>
#include <string>

#include "proto/reward.grpc.pb.h"

namespace lockstep::rewards::testing {

struct FaultOptions {
  std::string token;                   // required bearer token ("" = none)
  std::chrono::milliseconds delay{0};  // sleep before answering each call
  int fail_first_calls = 0;            // the first N calls fail with UNAVAILABLE
  bool drop_last_score = false;        // answer one score fewer than items
  // Calls answered before the process kills itself with SIGKILL at the start of the next one
  // (the call in flight and every later one see a dead server); -1 = never. Only for the
  // process form (fault_reward_server --die-after-calls N): it kills whoever hosts the service.
  int die_after_calls = -1;
};

class FaultRewardService final : public v1::Reward::Service {
 public:
  explicit FaultRewardService(FaultOptions options) : options_(std::move(options)) {}

  grpc::Status Score(grpc::ServerContext* context, const v1::ScoreRequest* request,
                     v1::ScoreResponse* response) override;

  int num_calls() const { return num_calls_.load(); }
  int num_items() const { return num_items_.load(); }
  int max_concurrent_calls() const { return max_concurrent_.load(); }

 private:
  const FaultOptions options_;
  std::atomic<int> num_calls_{0};
  std::atomic<int> num_items_{0};
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};
};

}  // namespace lockstep::rewards::testing

#endif  // LOCKSTEP_TESTS_REWARDS_FAULT_REWARD_SERVICE_H_
