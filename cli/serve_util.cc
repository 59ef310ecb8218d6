#include "cli/serve_util.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>

#include "absl/status/status.h"
#include "common/auth.h"

namespace lockstep::cli {

void AddServeOptions(CLI::App* command, ServeFlags* flags) {
  command->add_option("--host", flags->server.host, "Address to bind")->capture_default_str();
  command
      ->add_option("--port", flags->server.port,
                   "Port (0 = any free port; the bound one is printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--auth-token-file", flags->auth_token_file,
                      "File holding the job's token; calls without it are refused")
      ->check(CLI::ExistingFile);
  command->add_option("--tls-cert", flags->server.tls_cert_file, "TLS certificate (PEM)")
      ->check(CLI::ExistingFile);
  command->add_option("--tls-key", flags->server.tls_key_file, "TLS private key (PEM)")
      ->check(CLI::ExistingFile);
}

absl::StatusOr<std::string> LoadAuthToken(const ServeFlags& flags) {
  if (flags.auth_token_file.empty()) return std::string();
  return ReadAuthTokenFile(flags.auth_token_file);
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

absl::Status ServeUntilSignal(const ServeFlags& flags, const std::vector<grpc::Service*>& services,
                              const std::string& what, const sigset_t& stop_signals) {
  absl::StatusOr<RunningServer> running = StartServer(flags.server, services);
  if (!running.ok()) return running.status();
  std::printf("lockstep %s serving on %s:%d\n", what.c_str(), flags.server.host.c_str(),
              running->port);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::printf("signal %d: shutting down\n", signal_number);
  std::fflush(stdout);
  running->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  running->server->Wait();
  return absl::OkStatus();
}

}  // namespace lockstep::cli
