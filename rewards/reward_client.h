// Client of a remote reward server (lockstep.v1.Reward, proto/reward.proto), the RewardScorer
// the orchestrator uses for rewards written in any language.
//
//   ClientOptions options;
//   options.address = "127.0.0.1:50051";
//   options.auth_token = token;
//   absl::StatusOr<std::unique_ptr<RewardClient>> client = RewardClient::Create(options);
//   (*client)->ScoreAsync(std::move(items), [](std::vector<ItemOutcome> outcomes) { ... });
//
// How a call proceeds: ScoreAsync splits the items into batches of at most max_batch_items and
// queues them. One dispatcher thread starts queued batches while fewer than max_concurrency calls
// are in flight (gRPC callback API, so waiting costs no thread). Every attempt has its own
// deadline. UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED are retried after
// initial_backoff * backoff_multiplier^(attempt - 1), up to max_attempts attempts in all; any
// other status (UNAUTHENTICATED, INVALID_ARGUMENT, ...) fails the batch at once. A failed batch
// fails each of its items with the reason; a response with a different number of scores than
// items (or an id that is not the one sent) fails the whole batch without a retry; an item with
// `error` set or a non-finite reward fails alone.
#ifndef LOCKSTEP_REWARDS_REWARD_CLIENT_H_
#define LOCKSTEP_REWARDS_REWARD_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rewards/reward.h"
#include "rewards/reward_scorer.h"

namespace lockstep::rewards {

struct ClientOptions {
  std::string address;      // "host:port" of the reward server; required
  std::string auth_token;   // sent as "authorization: Bearer <token>" when non-empty
  std::string tls_ca_file;  // PEM root certificates; TLS when non-empty
  std::chrono::milliseconds deadline{10000};       // per attempt; > 0
  int max_attempts = 3;                            // first attempt included; >= 1
  std::chrono::milliseconds initial_backoff{100};  // before the first retry; >= 0
  double backoff_multiplier = 2;                   // >= 1
  int max_concurrency = 64;                        // calls in flight to this server at most; >= 1
  int max_batch_items = 64;                        // items per Score call at most; >= 1
};

class RewardClient final : public RewardScorer {
 public:
  // Validates the options (InvalidArgument naming the field) and starts the dispatcher thread.
  // Does not connect: a server that is down shows up as failed items, after retries.
  static absl::StatusOr<std::unique_ptr<RewardClient>> Create(ClientOptions options);

  // Cancels calls in flight, fails every item not yet scored with "reward client shut down"
  // (their `done` callbacks still run, on the calling thread), and joins the dispatcher.
  ~RewardClient() override;

  RewardClient(const RewardClient&) = delete;
  RewardClient& operator=(const RewardClient&) = delete;

  std::string name() const override;
  void ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) override;
  ClientMetrics metrics() const override;

 private:
  class Impl;
  explicit RewardClient(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REWARD_CLIENT_H_
