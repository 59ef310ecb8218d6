#include "cli/serve_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

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

namespace {

// Written by the stop-signal handler, read by ServeUntilSignal.
int g_stop_pipe[2] = {-1, -1};

void OnStopSignal(int signal_number) {
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  const ssize_t written = write(g_stop_pipe[1], &byte, 1);  // async-signal-safe
  (void)written;
}

}  // namespace

// Blocking alone is not enough: threads that started before this call (a BLAS library's pool
// started when it was loaded) do not block the stop signals, and the kernel may deliver a
// process-directed SIGTERM to any thread that does not block it. With the default action that
// killed the server without a clean shutdown (seen as a flaky trainer_service_test under load).
// So the signals also get a handler, which works on whichever thread receives them.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (g_stop_pipe[0] < 0 && pipe2(g_stop_pipe, O_CLOEXEC) == 0) {
    struct sigaction action = {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  }
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
  if (g_stop_pipe[0] >= 0) {
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);  // a pending signal runs the handler now
    unsigned char byte = 0;
    ssize_t got = 0;
    do {
      got = read(g_stop_pipe[0], &byte, 1);
    } while (got < 0 && errno == EINTR);
    signal_number = byte;
  } else {
    sigwait(&stop_signals, &signal_number);
  }
  std::printf("signal %d: shutting down\n", signal_number);
  std::fflush(stdout);
  running->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  running->server->Wait();
  return absl::OkStatus();
}

}  // namespace lockstep::cli
