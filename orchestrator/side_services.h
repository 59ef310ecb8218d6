// Reward and environment servers a job starts from a `command` (config [[rewards.servers]] and
// [environment]): started as supervised children like the trainer and generators, on a free
// loopback port, with `--port P --auth-token-file F` appended to the user's argv, output in the
// run's logs/ folder. The supervisor (process_supervisor.h) waits for the "serving on HOST:PORT"
// line and the gRPC health service, and stops them with the job.
//
//   LaunchSideService(supervisor, "reward0", {"/usr/bin/python3", "server.py"}, token_file,
//                     "runs/x/logs/reward0.log");
//   ... start the other children ...
//   absl::StatusOr<std::string> address = supervisor.WaitUntilServing("reward0");
//
// Thread safety: as ProcessSupervisor (call from the job's main thread).
#ifndef LOCKSTEP_ORCHESTRATOR_SIDE_SERVICES_H_
#define LOCKSTEP_ORCHESTRATOR_SIDE_SERVICES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "orchestrator/process_supervisor.h"

namespace lockstep::orchestrator {

// The argv a side service is started with: `command` + {"--port", port, "--auth-token-file",
// token_file}.
std::vector<std::string> SideServiceArgv(const std::vector<std::string>& command, int port,
                                         const std::string& token_file);

// Picks a free loopback port and starts `command` (see SideServiceArgv) as child `name`. Returns
// once it has exec'd; errors name the child and the command.
absl::Status LaunchSideService(ProcessSupervisor& supervisor, const std::string& name,
                               const std::vector<std::string>& command,
                               const std::string& token_file, const std::string& log_path);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_SIDE_SERVICES_H_
