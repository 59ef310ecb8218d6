// Test support: start or run the `lockstep` binary with its output captured, and read a file
// whole. Header-only; a test target defines LOCKSTEP_BINARY (the path of the built binary).
#ifndef LOCKSTEP_TESTS_SUPPORT_RUN_LOCKSTEP_H_
#define LOCKSTEP_TESTS_SUPPORT_RUN_LOCKSTEP_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::test_support {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Starts `LOCKSTEP_BINARY args...` with stdout and stderr in `log`; returns its pid (the caller
// waits for it).
inline pid_t SpawnLockstep(const std::vector<std::string>& args, const std::filesystem::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "w");
    dup2(fileno(out), 1);
    dup2(fileno(out), 2);
    std::vector<char*> argv = {const_cast<char*>(LOCKSTEP_BINARY)};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Runs `LOCKSTEP_BINARY args...` with stdout and stderr in `log`; killed (and a test failure
// added) after `timeout`. exit_code is 128 + signal for a killed process.
inline Outcome RunLockstep(const std::vector<std::string>& args, const std::filesystem::path& log,
                           std::chrono::seconds timeout = std::chrono::seconds(240)) {
  const pid_t pid = SpawnLockstep(args, log);
  Outcome outcome;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "lockstep " << (args.empty() ? "" : args[0]) << " timed out";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.output = ReadFile(log);
  return outcome;
}

}  // namespace lockstep::test_support

#endif  // LOCKSTEP_TESTS_SUPPORT_RUN_LOCKSTEP_H_
