#include "tests/rewards/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep::rewards::testing {

absl::StatusOr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("ChildProcess: empty argv");
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return absl::InternalError("ChildProcess: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("ChildProcess: fork failed");
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "ChildProcess: cannot exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  return ChildProcess(pid, pipe_fds[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), stdout_fd_(other.stdout_fd_), buffered_(std::move(other.buffered_)) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) KillAndWait(SIGKILL);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

absl::StatusOr<int> ChildProcess::WaitForServingPort(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  constexpr absl::string_view kMarker = "serving on ";
  while (true) {
    // Look for a complete line with the marker in what was read so far.
    size_t line_start = 0;
    for (size_t newline; (newline = buffered_.find('\n', line_start)) != std::string::npos;
         line_start = newline + 1) {
      absl::string_view line(buffered_.data() + line_start, newline - line_start);
      const size_t marker = line.find(kMarker);
      const size_t colon = line.rfind(':');
      int port = 0;
      if (marker != absl::string_view::npos && colon != absl::string_view::npos &&
          absl::SimpleAtoi(line.substr(colon + 1), &port)) {
        return port;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("no 'serving on' line from pid ", pid_, "; output: ", buffered_));
    }
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    if (::poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("pid ", pid_, " closed its output before serving; output: ", buffered_));
    }
    buffered_.append(chunk, static_cast<size_t>(n));
  }
}

int ChildProcess::KillAndWait(int signal) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  return Wait();
}

int ChildProcess::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

}  // namespace lockstep::rewards::testing
