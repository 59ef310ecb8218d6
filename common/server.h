// Starting a lockstep gRPC server: bind (127.0.0.1 unless told otherwise), optional TLS from
// certificate files, the standard health service, and the bound port reported back. Every
// `lockstep serve …` command and every loopback test uses this one path.
//
//   MyService service(...);
//   absl::StatusOr<RunningServer> running = StartServer({.port = 0}, {&service});
//   ... running->port ...
//   running->server->Shutdown();
#ifndef LOCKSTEP_COMMON_SERVER_H_
#define LOCKSTEP_COMMON_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                 // 0 = any free port
  std::string tls_cert_file;    // PEM; TLS is on when both files are given
  std::string tls_key_file;     // PEM
  int max_message_bytes = 256 << 20;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Registers `services` (not owned; they must outlive the server) plus grpc.health.v1.Health
// and starts listening. Unavailable naming host:port when the address cannot be bound;
// InvalidArgument when a TLS file cannot be read.
absl::StatusOr<RunningServer> StartServer(const ServerOptions& options,
                                          const std::vector<grpc::Service*>& services);

// A client channel to `address` ("host:port"); TLS when `tls_ca_file` is non-empty. Large
// messages allowed (rollout batches).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const std::string& tls_ca_file = "");

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SERVER_H_
