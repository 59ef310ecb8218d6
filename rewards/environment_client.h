// Client of a remote environment server (lockstep.v1.Environment, proto/reward.proto). It is an
// Environment, so the episode driver (episode.h) runs remote and in-process environments alike.
//
// Every call has a deadline. Retries (with exponential backoff) differ by call, because Reset
// and Step change server state:
// - Reset retries on UNAVAILABLE / DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED; before a retry it
//   Closes the episode, in case the lost attempt did create it.
// - Step retries only on UNAVAILABLE and RESOURCE_EXHAUSTED (the server refused or never got
//   the turn). A Step that ran past its deadline may have been applied, so it is not repeated:
//   the episode fails.
// - Close retries on the same codes as Reset (it is idempotent).
// A StepResponse with `error` set becomes an Aborted status carrying the server's message.
#ifndef LOCKSTEP_REWARDS_ENVIRONMENT_CLIENT_H_
#define LOCKSTEP_REWARDS_ENVIRONMENT_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/reward.grpc.pb.h"
#include "rewards/environment.h"

namespace lockstep::rewards {

struct EnvironmentClientOptions {
  std::string address;                        // "host:port"; required
  std::string auth_token;                     // sent as a bearer token when non-empty
  std::string tls_ca_file;                    // PEM root certificates; TLS when non-empty
  std::chrono::milliseconds deadline{10000};  // per attempt; > 0
  int max_attempts = 3;                       // first attempt included; >= 1
  std::chrono::milliseconds initial_backoff{100};
  double backoff_multiplier = 2;  // >= 1
};

// Counters since creation; thread-safe snapshots.
struct EnvironmentClientMetrics {
  int64_t rpcs = 0;  // attempts, retries included
  int64_t retries = 0;
  int64_t rpcs_failed = 0;        // attempts that ended non-OK
  int64_t deadline_exceeded = 0;  // attempts that ran past the deadline
  int64_t step_errors = 0;        // StepResponses carrying `error`
};

class EnvironmentClient final : public Environment {
 public:
  // InvalidArgument naming the bad option. Does not connect.
  static absl::StatusOr<std::unique_ptr<EnvironmentClient>> Create(
      EnvironmentClientOptions options);

  std::string name() const override;
  // Blocking; thread-safe. Errors keep the server's gRPC code (NotFound, AlreadyExists,
  // Unavailable, DeadlineExceeded, Unauthenticated ...) with the address in the message.
  absl::StatusOr<ResetResult> Reset(const EpisodeStart& start) override;
  absl::StatusOr<StepResult> Step(const StepInput& input) override;
  absl::Status Close(absl::string_view episode_id) override;

  EnvironmentClientMetrics metrics() const;

 private:
  EnvironmentClient(EnvironmentClientOptions options, std::unique_ptr<v1::Environment::Stub> stub);

  // Runs `attempt` (one RPC with a fresh context) until it succeeds, fails with a code outside
  // `retryable`, or max_attempts is reached; sleeps the backoff between attempts.
  grpc::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& attempt,
                               bool (*retryable)(grpc::StatusCode),
                               const std::function<void()>& before_retry);

  const EnvironmentClientOptions options_;
  const std::unique_ptr<v1::Environment::Stub> stub_;
  std::atomic<int64_t> rpcs_{0}, retries_{0}, rpcs_failed_{0}, deadline_exceeded_{0},
      step_errors_{0};
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_ENVIRONMENT_CLIENT_H_
