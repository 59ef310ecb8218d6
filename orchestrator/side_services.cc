#include "orchestrator/side_services.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/free_port.h"

namespace lockstep::orchestrator {

std::vector<std::string> SideServiceArgv(const std::vector<std::string>& command, int port,
                                         const std::string& token_file) {
  std::vector<std::string> argv = command;
  argv.insert(argv.end(), {"--port", std::to_string(port), "--auth-token-file", token_file});
  return argv;
}

absl::Status LaunchSideService(ProcessSupervisor& supervisor, const std::string& name,
                               const std::vector<std::string>& command,
                               const std::string& token_file, const std::string& log_path) {
  if (command.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty command"));
  absl::StatusOr<int> port = PickFreePort();
  if (!port.ok()) return port.status();
  absl::StatusOr<pid_t> pid =
      supervisor.Start({name, SideServiceArgv(command, *port, token_file), {}, log_path});
  if (!pid.ok()) {
    return absl::Status(pid.status().code(), absl::StrCat(name, " ('", absl::StrJoin(command, " "),
                                                          "'): ", pid.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::orchestrator
