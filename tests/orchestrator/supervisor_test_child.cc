// A stand-in child process for process_supervisor_test. Modes:
//   serve PORT          gRPC server with the health service on 127.0.0.1:PORT (0 = any); prints
//                       "lockstep fake serving on 127.0.0.1:P" and runs until SIGTERM.
//   exit CODE           prints two lines to stderr and exits with CODE.
//   ignore-term         ignores SIGTERM, prints "lockstep stubborn serving on 127.0.0.1:1" (no
//                       server), sleeps (only SIGKILL stops it).
//   orchestrate DIR N   an orchestrator stand-in: starts N `sleep 1000` children through a
//                       ProcessSupervisor (logs in DIR), prints "child PID" for each, sleeps.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "orchestrator/process_supervisor.h"

namespace {

int Serve(int port) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  grpc::CallbackGenericService unimplemented;  // a server needs one callback service
  builder.RegisterCallbackGenericService(&unimplemented);
  int bound_port = 0;
  std::string address = "127.0.0.1:" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::fprintf(stderr, "error: cannot bind %s (address in use?)\n", address.c_str());
    return 1;
  }
  std::printf("lockstep fake serving on 127.0.0.1:%d\n", bound_port);
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  server->Shutdown();
  return 0;
}

int Orchestrate(const std::string& dir, int count) {
  lockstep::orchestrator::ProcessSupervisor supervisor;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<pid_t> pid = supervisor.Start({.name = "sleep" + std::to_string(i),
                                                  .argv = {"sleep", "1000"},
                                                  .log_path = dir + "/sleep.log"});
    if (!pid.ok()) {
      std::fprintf(stderr, "%s\n", std::string(pid.status().message()).c_str());
      return 1;
    }
    std::printf("child %d\n", static_cast<int>(*pid));
  }
  std::printf("started\n");
  std::fflush(stdout);
  while (true) pause();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve" && argc == 3) return Serve(std::atoi(argv[2]));
  if (mode == "exit" && argc == 3) {
    std::fprintf(stderr, "loading model\nfatal: model file missing\n");
    return std::atoi(argv[2]);
  }
  if (mode == "ignore-term") {
    signal(SIGTERM, SIG_IGN);
    std::printf("lockstep stubborn serving on 127.0.0.1:1\n");
    std::fflush(stdout);
    while (true) pause();
  }
  if (mode == "orchestrate" && argc == 4) return Orchestrate(argv[2], std::atoi(argv[3]));
  std::fprintf(stderr,
               "usage: supervisor_test_child serve PORT | exit CODE | ignore-term | "
               "orchestrate DIR N\n");
  return 2;
}
