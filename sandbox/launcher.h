// One run of lockstep-sandbox-init: writes the spec (launch_protocol.h) into a sealed memfd,
// spawns the init with stdin, stdout, stderr, the spec and the report pipe as its only
// descriptors, collects stdout and stderr up to their cap, reads the report, and enforces a
// backstop deadline. sandbox.cc turns a request into a LaunchSpec and a LaunchOutcome into an
// ExecResult.
#ifndef LOCKSTEP_SANDBOX_LAUNCHER_H_
#define LOCKSTEP_SANDBOX_LAUNCHER_H_

#include <sys/types.h>

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
  double total_wall_ms = 0;      // spawn to the ns init's end, as the launcher saw it
  // The outer init, still to be reaped (waitpid) by the caller: its ns init, and with it every
  // process of the run, is gone; it exits a moment later. -1 when it was reaped already.
  pid_t unreaped_init = -1;
};

// Spawns `init_path` and runs `spec` to its end. Errors (Internal) only for failures of the
// launcher itself (memfd, pipes, posix_spawn); failures inside the init come back in
// LaunchOutcome::error. Thread-safe; blocks the calling thread until every process of the run
// has exited but the outer init (LaunchOutcome::unreaped_init: the caller reaps it).
// `net_namespace_fd` (>= 0, a root caller's only): a network namespace of the host's root for
// this run alone (net_namespace_pool.h), which the init joins; -1: the init makes a fresh one.
absl::StatusOr<LaunchOutcome> Launch(const std::string& init_path, const LaunchSpec& spec,
                                     int net_namespace_fd = -1);

// An init spawned before its run is known ("warm"): it joins `cgroup_procs` at once (with
// cgroup v1 the attach waits ~10 ms for an RCU grace period), enters fresh namespaces, forks its
// namespace init and builds the read-only root of `root` (its sandbox record, binds and
// symlinks; the rest of `root` is ignored), all off the run's critical path, then waits on
// `socket` for the run's descriptors. It holds nothing of any run until then. The caller owns
// the descriptors and the process; hand it to LaunchWarm or DiscardWarmInit exactly once. The
// init dies with the thread that spawned it (PR_SET_PDEATHSIG), so spawn from a long-lived thread.
struct WarmInit {
  pid_t pid = -1;
  int socket = -1;       // our end; the namespace init receives spec, stdin, stdout, stderr here
  int report_read = -1;  // the run's report pipe
};

// `net_namespace_fd`: as Launch's, held by this init until it is reaped.
absl::StatusOr<WarmInit> SpawnWarmInit(const std::string& init_path,
                                       const std::vector<std::string>& cgroup_procs,
                                       const LaunchSpec& root, int net_namespace_fd = -1);

// Ends an unused warm init (it exits on the closed socket) and reaps it.
void DiscardWarmInit(WarmInit* warm);

// As Launch, on a warm init spawned with a `root` of the same sandbox record, binds and symlinks
// as `spec` (only the run's records are sent: `spec.cgroup_procs` is ignored, the init joined
// its cgroups already).
// Unavailable when the warm init is gone (it was killed, or failed to join its cgroups); it is
// reaped then, and the caller launches cold instead.
absl::StatusOr<LaunchOutcome> LaunchWarm(WarmInit warm, const LaunchSpec& spec);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_LAUNCHER_H_
