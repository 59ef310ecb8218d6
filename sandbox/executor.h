// The seam code rewards run programs through: the in-process Sandbox (sandbox.h) and the gRPC
// client of `lockstep serve sandbox` (sandbox_client.h) both implement it.
#ifndef LOCKSTEP_SANDBOX_EXECUTOR_H_
#define LOCKSTEP_SANDBOX_EXECUTOR_H_

#include "absl/status/statusor.h"
#include "sandbox/exec.h"

namespace lockstep::sandbox {

class Executor {
 public:
  virtual ~Executor() = default;

  // Runs one request to its end. InvalidArgument (naming the field) for a bad request; any other
  // error status means the executor itself failed (e.g. the service is unreachable). A program
  // that fails in any way is an OK result with its verdict; a sandbox that failed to set up is
  // an OK result with verdict kSandboxError.
  // Thread safety: safe to call concurrently from any thread.
  virtual absl::StatusOr<ExecResult> Execute(const ExecRequest& request) = 0;
};

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_EXECUTOR_H_
