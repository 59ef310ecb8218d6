// Watching the processes and files of a job from outside it, for the fault tests and
// bench_recovery: find a supervised child by its log file, see that a process is gone, count a
// file's lines, poll. No gtest here (benchmarks include it).
#ifndef LOCKSTEP_TESTS_FAULTS_PROCESS_WATCH_H_
#define LOCKSTEP_TESTS_FAULTS_PROCESS_WATCH_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace lockstep::fault_test {

namespace fs = std::filesystem;

// The pid of the process whose stdout is `log` (a supervised child writes to its log), or -1.
inline pid_t ProcessWritingTo(const fs::path& log) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code error;
    const fs::path target = fs::read_symlink(entry.path() / "fd" / "1", error);
    if (!error && target == log) return std::stoi(name);
  }
  return -1;
}

// True iff process `pid` has exited: no such process, or a zombie not yet reaped.
inline bool IsGone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t end_of_name = text.rfind(')');
  return end_of_name != std::string::npos && end_of_name + 2 < text.size() &&
         text[end_of_name + 2] == 'Z';
}

inline int64_t LineCount(const fs::path& path) {
  std::ifstream in(path);
  int64_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// Polls `condition` every millisecond for up to `timeout`.
template <typename Condition>
bool WaitFor(Condition condition, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace lockstep::fault_test

#endif  // LOCKSTEP_TESTS_FAULTS_PROCESS_WATCH_H_
