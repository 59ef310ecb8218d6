// grpc::Status -> absl::Status for the orchestrator's clients: same code, the message prefixed
// with what was called ("trainer 127.0.0.1:4101 TrainStep: ..."). Pure function; thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_GRPC_STATUS_H_
#define LOCKSTEP_ORCHESTRATOR_GRPC_STATUS_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace lockstep::orchestrator {

// OK for an OK status; otherwise the absl code with the same number and "what: message".
absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& what);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_GRPC_STATUS_H_
