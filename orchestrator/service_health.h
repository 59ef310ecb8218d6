// Asking a gRPC server whether it is up: the standard grpc.health.v1.Health/Check call, made
// as a raw (generic) call so that no generated health stub is needed.
// Thread-safe: no shared state.
#ifndef LOCKSTEP_ORCHESTRATOR_SERVICE_HEALTH_H_
#define LOCKSTEP_ORCHESTRATOR_SERVICE_HEALTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockstep::orchestrator {

// OK iff the server at `address` ("host:port", plaintext) answers Check("") with SERVING
// within `timeout`. Unavailable (no answer, or NOT_SERVING / UNKNOWN, named) otherwise.
absl::Status CheckServing(const std::string& address, absl::Duration timeout);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_SERVICE_HEALTH_H_
