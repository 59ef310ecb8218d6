// Process helpers for bench_generator: running a child program to completion, reading this
// process's peak resident memory, and a temporary directory removed on scope exit.
//
// Thread safety: RunChildProcess and ProcStatusMib may be called from any thread; a
// TemporaryDirectory belongs to its creator.
#ifndef LOCKSTEP_BENCH_GENERATOR_PROCESS_UTIL_H_
#define LOCKSTEP_BENCH_GENERATOR_PROCESS_UTIL_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::bench {

// Runs argv[0] (searched in PATH unless it contains a '/') with argv, inheriting stdout and
// stderr, and waits for it. Internal error, naming the program, if it cannot start, exits
// non-zero or dies from a signal.
absl::Status RunChildProcess(const std::vector<std::string>& argv);

// A memory field of /proc/self/status in MiB: "VmHWM" (peak resident set size), "VmRSS"
// (resident now), "RssFile", ... Internal error, naming the field, if it cannot be read.
absl::StatusOr<double> ProcStatusMib(const std::string& field);

// A fresh directory under the system temporary directory, removed with its contents when the
// object is destroyed.
class TemporaryDirectory {
 public:
  static absl::StatusOr<TemporaryDirectory> Create(const std::string& prefix);
  TemporaryDirectory(TemporaryDirectory&& other) noexcept : path_(std::move(other.path_)) {
    other.path_.clear();
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory();

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TemporaryDirectory(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_GENERATOR_PROCESS_UTIL_H_
