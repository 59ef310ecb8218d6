// One run of lockstep-sandbox-init: writes the spec (launch_protocol.h) into a sealed memfd,
// spawns the init with stdin, stdout, stderr, the spec and the report pipe as its only
// descriptors, collects stdout and stderr up to their cap, reads the report, and enforces a
// backstop deadline. sandbox.cc turns a request into a LaunchSpec and a LaunchOutcome into an
// ExecResult.
#ifndef LOCKSTEP_SANDBOX_LAUNCHER_H_
#define LOCKSTEP_SANDBOX_LAUNCHER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/launch_protocol.h"

namespace lockstep::sandbox {

struct LaunchStep {
  protocol::StepRecord limits = {};
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

struct LaunchFile {
  std::string path;  // relative to /work
  std::string content;
  uint32_t mode = 0644;
};

struct LaunchSpec {
  protocol::SandboxRecord sandbox = {};
  std::vector<std::pair<std::string, std::string>> read_only_binds;  // host path, inside path
  std::vector<std::pair<std::string, std::string>> device_binds;
  std::vector<std::pair<std::string, std::string>> symlinks;          // target, inside path
  std::vector<LaunchFile> files;
  std::vector<std::string> cgroup_procs;
  std::string seccomp_filter;  // BPF bytes
  std::vector<LaunchStep> steps;
  std::string stdin_data;
  int64_t max_output_bytes = 0;  // stdout and stderr each; past it the run is killed
  int64_t deadline_ms = 0;       // backstop: the launcher kills the run past this
};

struct LaunchOutcome {
  std::string stdout_data;
  std::string stderr_data;
  bool output_limit = false;     // the launcher killed the run for output past the cap
  bool deadline_killed = false;  // the launcher killed the run at the backstop deadline
  std::string error;             // a kError record from the init, or a launcher failure
  struct Step {
    protocol::StepDoneRecord done = {};
    std::string captured_output;
  };
  std::vector<Step> steps;       // one per finished step, in order
  double total_wall_ms = 0;      // spawn to reap, as the launcher saw it
};

// Spawns `init_path` and runs `spec` to its end. Errors (Internal) only for failures of the
// launcher itself (memfd, pipes, posix_spawn); failures inside the init come back in
// LaunchOutcome::error. Thread-safe; blocks the calling thread until every process of the run
// has exited.
absl::StatusOr<LaunchOutcome> Launch(const std::string& init_path, const LaunchSpec& spec);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_LAUNCHER_H_
