// Per-job bearer tokens for every lockstep gRPC service.
//
// The orchestrator writes a random token to a file and starts each service with
// `--auth-token-file FILE`. Clients send it as `authorization: Bearer <token>` metadata; a
// service refuses any other call with UNAUTHENTICATED. An empty token means auth is off (a
// service started by hand for local experiments). The standard health service is not checked:
// it says nothing but SERVING / NOT_SERVING.
#ifndef LOCKSTEP_COMMON_AUTH_H_
#define LOCKSTEP_COMMON_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

// The token in `path` with surrounding whitespace removed. NotFound / InvalidArgument (empty
// file) naming the path.
absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path);

// A fresh random token (32 hex characters from the OS random source).
std::string NewAuthToken();

// Writes `token` to `path` readable by the owner only (mode 0600).
absl::Status WriteAuthTokenFile(const std::string& path, const std::string& token);

// Server side: OK if `token` is empty or the call carries it; otherwise UNAUTHENTICATED.
// Compares in constant time.
grpc::Status CheckAuth(const grpc::ServerContextBase& context, const std::string& token);

// Client side: attaches `token` to the call (no-op when empty).
void AttachAuthToken(grpc::ClientContext* context, const std::string& token);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_AUTH_H_
