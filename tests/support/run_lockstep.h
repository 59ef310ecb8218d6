// Test support: start or run the `lockstep` binary with its output captured, a fresh directory
// per test, the arguments of a `lockstep run` into it, and reading files (whole, or as JSON
// lines). Header-only; a test target defines LOCKSTEP_BINARY (the path of the built binary).
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
#include "nlohmann/json.hpp"

namespace lockstep::test_support {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Each line of a JSONL file (metrics.jsonl, mismatch records), parsed.
inline std::vector<nlohmann::json> JsonLines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

// <temp>/<prefix>_<pid>_<this test's name>, emptied and created: a directory of the running
// test's own.
inline std::filesystem::path FreshTestDirectory(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "_" + std::to_string(getpid()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// `run CONFIG --name NAME --set job.output_root="ROOT"` and a `--set` for each of `sets`: a job
// whose run directory is ROOT/NAME.
inline std::vector<std::string> RunArgs(const std::filesystem::path& config,
                                        const std::filesystem::path& root, const std::string& name,
                                        const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args = {"run", config.string(), "--name", name, "--set",
                                   "job.output_root=\"" + root.string() + "\""};
  for (const std::string& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  return args;
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
