// ExecRequest / ExecResult <-> lockstep.v1 messages (proto/sandbox.proto), for the sandbox
// service and its client. Pure functions; thread-safe.
#ifndef LOCKSTEP_SANDBOX_SANDBOX_CONVERT_H_
#define LOCKSTEP_SANDBOX_SANDBOX_CONVERT_H_

#include "absl/status/statusor.h"
#include "proto/sandbox.pb.h"
#include "sandbox/exec.h"

namespace lockstep::sandbox {

// Every limit is sent (set), so the server runs exactly the client's limits.
void ToProto(const ExecRequest& request, v1::ExecuteRequest* proto);
// Unset limits take ExecLimits' defaults; set ones are copied as they are (ValidateRequest
// judges them).
ExecRequest FromProto(const v1::ExecuteRequest& proto);

void ToProto(const ExecResult& result, v1::ExecuteResponse* proto);
// InvalidArgument for a response without a known verdict (a server of another version).
absl::StatusOr<ExecResult> FromProto(const v1::ExecuteResponse& proto);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_SANDBOX_CONVERT_H_
