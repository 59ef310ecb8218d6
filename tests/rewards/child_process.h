// A child process for tests that start real servers (the Python example, the fault server):
// fork/exec with stdout piped back, wait for its "serving on HOST:PORT" line, kill it.
#ifndef LOCKSTEP_TESTS_REWARDS_CHILD_PROCESS_H_
#define LOCKSTEP_TESTS_REWARDS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::rewards::testing {

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with `argv`; stderr is inherited so failures show in the
  // test log.
  static absl::StatusOr<ChildProcess> Start(const std::vector<std::string>& argv);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  // Kills (SIGKILL) and reaps the child if it is still running.
  ~ChildProcess();

  // Reads stdout until a line containing "serving on HOST:PORT" and returns PORT. DeadlineExceeded
  // after `timeout`; Unavailable if the child exits first (the lines it printed are in the
  // message).
  absl::StatusOr<int> WaitForServingPort(std::chrono::milliseconds timeout);

  // Sends `signal` and reaps the child; returns its wait status (see waitpid), -1 if it was
  // already reaped.
  int KillAndWait(int signal);

  // Waits for the child to exit by itself; returns its wait status.
  int Wait();

  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
};

}  // namespace lockstep::rewards::testing

#endif  // LOCKSTEP_TESTS_REWARDS_CHILD_PROCESS_H_
