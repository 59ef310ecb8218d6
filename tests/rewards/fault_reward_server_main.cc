// fault_reward_server: FaultRewardService as a process, for tests that kill the server (-9).
//   fault_reward_server [--port P] [--delay-ms D] [--token T | --auth-token-file F]
//                       [--die-after-calls N]
// Prints "serving on 127.0.0.1:PORT" once listening, then serves until killed (or, with
// --die-after-calls, SIGKILLs itself when call N+1 arrives: a server dying mid-run).
// `lockstep run` starts it as a [[rewards.servers]] command (--port and --auth-token-file).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/server.h"
#include "tests/rewards/fault_reward_service.h"

int main(int argc, char** argv) {
  int port = 0;
  lockstep::rewards::testing::FaultOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--port") {
      port = std::atoi(value);
    } else if (flag == "--delay-ms") {
      options.delay = std::chrono::milliseconds(std::atoi(value));
    } else if (flag == "--token") {
      options.token = value;
    } else if (flag == "--auth-token-file") {
      absl::StatusOr<std::string> token = lockstep::ReadAuthTokenFile(value);
      if (!token.ok()) {
        std::fprintf(stderr, "fault_reward_server: %s\n", token.status().ToString().c_str());
        return 2;
      }
      options.token = *token;
    } else if (flag == "--die-after-calls") {
      options.die_after_calls = std::atoi(value);
    } else {
      std::fprintf(stderr, "fault_reward_server: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  lockstep::rewards::testing::FaultRewardService service(options);
  absl::StatusOr<lockstep::RunningServer> running =
      lockstep::StartServer({.host = "127.0.0.1", .port = port}, {&service});
  if (!running.ok()) {
    std::fprintf(stderr, "fault_reward_server: %s\n", running.status().ToString().c_str());
    return 1;
  }
  std::printf("serving on 127.0.0.1:%d\n", running->port);
  std::fflush(stdout);
  running->server->Wait();
  return 0;
}
