// fault_reward_server: FaultRewardService as a process, for tests that kill the server (-9).
//   fault_reward_server [--port P] [--delay-ms D] [--token T]
// Prints "serving on 127.0.0.1:PORT" once listening, then serves until killed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
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
