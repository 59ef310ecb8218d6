// Starting a child process: the one way lockstep runs another program. posix_spawn, so that
// nothing of ours runs between fork and exec; a child that must die with its parent
// (die_with_parent: PR_SET_PDEATHSIG, set between fork and exec with async-signal-safe calls
// only) is the one case that forks.
//
//   absl::StatusOr<pid_t> pid = StartChildProcess({.argv = {"/bin/true"}, .output_path = log});
//   absl::StatusOr<int> status = WaitForChild(*pid);          // a waitpid status
//   absl::Status done = RunToCompletion({"lockstep", "init-model", …}, log);
//
// The child starts with a clean signal state (nothing blocked, SIGINT/SIGTERM/SIGPIPE default).
//
// Thread safety: the functions may be called from any thread.
#ifndef LOCKSTEP_COMMON_CHILD_PROCESS_H_
#define LOCKSTEP_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

struct ChildProcessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) ours
  std::string output_path;         // stdout + stderr appended here; "" keeps ours
  bool null_stdin = true;          // stdin from /dev/null
  bool own_process_group = false;  // the child leads a new process group (pgid = its pid)
  // SIGTERM to the child when the thread that started it exits (the orchestrator dies, even by
  // SIGKILL). Start such children from a thread that lives as long as they should.
  bool die_with_parent = false;
};

// Starts the child and returns its pid once exec succeeded. InvalidArgument for an empty argv;
// Internal naming the output file when it cannot be opened; FailedPrecondition
// "exec ARGV0: <reason>" when the program cannot be run. The caller reaps the child.
absl::StatusOr<pid_t> StartChildProcess(const ChildProcessOptions& options);

// Waits for the child to exit and returns its waitpid status (WIFEXITED, WEXITSTATUS, …).
absl::StatusOr<int> WaitForChild(pid_t pid);

// "exited with status N" or "killed by signal N (NAME)" for a waitpid status.
std::string DescribeWaitStatus(int status);

// Starts argv with stdout and stderr appended to `output_path`, and waits for it. Internal
// naming the command and the output file unless it exits with status 0.
absl::Status RunToCompletion(const std::vector<std::string>& argv, const std::string& output_path);

// Our environment with `overrides` added or replacing same-named variables, as NAME=VALUE.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CHILD_PROCESS_H_
