// absl::Status <-> grpc::Status for every lockstep service and client: the same code (absl and
// gRPC share the canonical code numbers). Pure functions; thread-safe.
#ifndef LOCKSTEP_COMMON_GRPC_STATUS_H_
#define LOCKSTEP_COMMON_GRPC_STATUS_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace lockstep {

// What a service answers: the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// What a client reports: OK for an OK status; otherwise the same code and "what: message",
// where `what` names the call ("trainer 127.0.0.1:4101 TrainStep").
absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& what);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_GRPC_STATUS_H_
