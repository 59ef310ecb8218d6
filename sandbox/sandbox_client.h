// Client of `lockstep serve sandbox` (lockstep.v1.Sandbox, proto/sandbox.proto): an Executor
// whose programs run on the service, so that code rewards use a remote sandbox exactly as the
// in-process one.
//
//   absl::StatusOr<std::unique_ptr<SandboxClient>> client =
//       SandboxClient::Create({.address = "127.0.0.1:50070", .auth_token = token});
//   absl::StatusOr<ExecResult> result = (*client)->Execute(request);
//
// Each attempt's deadline is the request's wall-clock limit plus `deadline_margin` (plus
// `compile_allowance` for cpp), so a queued or slow call does not hang forever. UNAVAILABLE
// (service down or restarting) and RESOURCE_EXHAUSTED (its queue full) are retried after
// initial_backoff * backoff_multiplier^(attempt - 1), up to max_attempts attempts in all. Any
// failure left after that is an error status with gRPC's code (UNAVAILABLE, UNAUTHENTICATED,
// DEADLINE_EXCEEDED, INVALID_ARGUMENT naming the field, ...) and a message naming the address:
// the code_tests reward then fails the item, never scores it 0.
#ifndef LOCKSTEP_SANDBOX_SANDBOX_CLIENT_H_
#define LOCKSTEP_SANDBOX_SANDBOX_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/sandbox.grpc.pb.h"
#include "sandbox/executor.h"

namespace lockstep::sandbox {

struct SandboxClientOptions {
  std::string address;      // "host:port"; required
  std::string auth_token;   // sent as "authorization: Bearer <token>" when non-empty
  std::string tls_ca_file;  // PEM root certificates; TLS when non-empty
  std::chrono::milliseconds deadline_margin{30000};    // > 0
  std::chrono::milliseconds compile_allowance{60000};  // >= 0, cpp only
  int max_attempts = 3;                                // >= 1
  std::chrono::milliseconds initial_backoff{100};      // >= 0
  double backoff_multiplier = 2;                       // >= 1
};

class SandboxClient final : public Executor {
 public:
  // InvalidArgument naming the option. Does not connect: a service that is down shows up as an
  // UNAVAILABLE status from Execute, after retries.
  static absl::StatusOr<std::unique_ptr<SandboxClient>> Create(SandboxClientOptions options);

  // Thread safety: safe to call concurrently (each call has its own gRPC context).
  absl::StatusOr<ExecResult> Execute(const ExecRequest& request) override;

  const SandboxClientOptions& options() const { return options_; }

 private:
  SandboxClient(SandboxClientOptions options, std::unique_ptr<v1::Sandbox::Stub> stub)
      : options_(std::move(options)), stub_(std::move(stub)) {}

  const SandboxClientOptions options_;
  const std::unique_ptr<v1::Sandbox::Stub> stub_;
};

// SandboxClient::Create({.address = address, .auth_token = auth_token}) as a shared Executor:
// what BuiltinContext::connect_sandbox calls for code_tests' sandbox address.
absl::StatusOr<std::shared_ptr<Executor>> ConnectSandbox(const std::string& address,
                                                         const std::string& auth_token);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_SANDBOX_CLIENT_H_
