// What the reward and environment clients share about calling a server that may be slow, down
// or restarting: which gRPC codes are worth retrying, the backoff between attempts, and a
// channel that notices a restarted server quickly.
#ifndef LOCKSTEP_REWARDS_RPC_RETRY_H_
#define LOCKSTEP_REWARDS_RPC_RETRY_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::rewards {

// True for the transient codes: UNAVAILABLE (server down, restarting, connection lost),
// DEADLINE_EXCEEDED (slow) and RESOURCE_EXHAUSTED (overloaded). Everything else — a wrong token,
// a bad request, a server bug — would fail the same way again.
bool IsRetryable(grpc::StatusCode code);

// The wait before attempt `num_attempts_done + 1`: initial * multiplier^(num_attempts_done - 1).
std::chrono::milliseconds Backoff(std::chrono::milliseconds initial, double multiplier,
                                  int num_attempts_done);

// "UNAVAILABLE: <message>".
std::string DescribeStatus(const grpc::Status& status);

// A channel to `address` that retries connecting after 100 ms, backing off to 1 s (gRPC's default
// grows to two minutes, which would fail every call long after a restarted server is back). TLS
// when `tls_ca_file` is non-empty (InvalidArgument naming the file when it cannot be read). Large
// messages allowed.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeRetryFriendlyChannel(
    const std::string& address, const std::string& tls_ca_file);

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_RPC_RETRY_H_
