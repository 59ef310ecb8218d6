// absl::Status -> grpc::Status for every lockstep service: same code (absl and gRPC share the
// canonical code numbers) and message. Pure function; thread-safe.
#ifndef LOCKSTEP_COMMON_GRPC_STATUS_H_
#define LOCKSTEP_COMMON_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace lockstep {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_GRPC_STATUS_H_
