// What every `lockstep serve …` command shares: the network flags (--host, --port,
// --auth-token-file, --tls-cert, --tls-key), starting the server, and waiting for SIGINT/SIGTERM.
#ifndef LOCKSTEP_CLI_SERVE_UTIL_H_
#define LOCKSTEP_CLI_SERVE_UTIL_H_

#include <signal.h>

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/server.h"

namespace lockstep::cli {

struct ServeFlags {
  ServerOptions server;          // host 127.0.0.1, port 0 by default
  std::string auth_token_file;   // empty: auth off
};

// Registers --host, --port, --auth-token-file, --tls-cert, --tls-key on `command`.
void AddServeOptions(CLI::App* command, ServeFlags* flags);

// The token from --auth-token-file, or "" when the flag is not given.
absl::StatusOr<std::string> LoadAuthToken(const ServeFlags& flags);

// Blocks SIGINT and SIGTERM in the calling thread and installs a handler that hands them to
// ServeUntilSignal, whichever thread receives them. Call first in a serve command, before any
// thread starts (threads inherit the mask).
sigset_t BlockStopSignals();

// Starts the server, prints "lockstep <what> serving on HOST:PORT" (the line the orchestrator
// and the tests wait for), waits for a stop signal, then shuts the server down with a one-second
// grace period for calls in flight.
absl::Status ServeUntilSignal(const ServeFlags& flags, const std::vector<grpc::Service*>& services,
                              const std::string& what, const sigset_t& stop_signals);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_CLI_SERVE_UTIL_H_
