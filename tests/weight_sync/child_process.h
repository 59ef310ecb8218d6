// A child process for multi-process tests: started with fork + exec, its stdout read line by
// line through a pipe with deadlines, killed and reaped by the test. Test-only helper.
#ifndef LOCKSTEP_TESTS_WEIGHT_SYNC_CHILD_PROCESS_H_
#define LOCKSTEP_TESTS_WEIGHT_SYNC_CHILD_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"

namespace lockstep::testing {

// A TCP port that was free a moment ago, outside the ephemeral range (common/free_port.h), so
// that a concurrent test's connections cannot take it before the store binds it.
inline int FreeLoopbackPort() { return PickFreePort().value(); }

class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> argv) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> args;
      for (std::string& arg : argv) args.push_back(arg.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    out_fd_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exit_code_.has_value()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // The next stdout line, or nullopt at end of output or when `timeout` passes first.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        output_ += line + "\n";
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd poll_fd{out_fd_, POLLIN, 0};
      if (poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(out_fd_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void Kill() { kill(pid_, SIGKILL); }

  // The exit code (128 + signal when killed), or nullopt if it is still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (exit_code_.has_value()) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // Every line read so far (for failure messages).
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  std::string output_;
  std::optional<int> exit_code_;
};

}  // namespace lockstep::testing

#endif  // LOCKSTEP_TESTS_WEIGHT_SYNC_CHILD_PROCESS_H_
