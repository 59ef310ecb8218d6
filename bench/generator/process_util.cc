#include "bench/generator/process_util.h"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace lockstep::bench {

absl::Status RunChildProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("RunChildProcess: argv is empty");
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (error != 0) {
    return absl::InternalError(absl::StrCat(argv[0], ": cannot start: ", std::strerror(error)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat(argv[0], ": waitpid: ", std::strerror(errno)));
    }
  }
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat(argv[0], " died from signal ", WTERMSIG(status)));
  }
  if (WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " exited with status ", WEXITSTATUS(status)));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ProcStatusMib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = field + ":";
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) {
      std::istringstream fields(line.substr(prefix.size()));
      double kib = 0;
      if (fields >> kib) return kib / 1024.0;
    }
  }
  return absl::InternalError(absl::StrCat("/proc/self/status: no readable ", field, " field"));
}

absl::StatusOr<TemporaryDirectory> TemporaryDirectory::Create(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat(pattern, ": mkdtemp: ", std::strerror(errno)));
  }
  return TemporaryDirectory(pattern);
}

TemporaryDirectory::~TemporaryDirectory() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace lockstep::bench
