#include "orchestrator/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;

bool HoldsRun(const fs::path& dir) {
  return fs::exists(dir / "config.toml") || fs::exists(dir / "metrics.jsonl");
}

}  // namespace

absl::StatusOr<RunDir> RunDir::Create(const std::string& root, const std::string& name) {
  const fs::path dir = fs::path(root) / name;
  if (HoldsRun(dir)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "run directory ", dir.string(), " already holds a run; continue it with --resume ",
        dir.string(), ", or choose another name (--set job.name=…)"));
  }
  std::error_code error;
  for (const fs::path& sub : {dir / "logs", dir / "checkpoints"}) {
    fs::create_directories(sub, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot create ", sub.string(), ": ", error.message()));
    }
  }
  return RunDir(dir.string());
}

absl::StatusOr<RunDir> RunDir::Open(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  if (!fs::is_directory(trimmed) || !HoldsRun(trimmed)) {
    return absl::NotFoundError(absl::StrCat(
        "no run directory at ", path, " (expected a folder holding config.toml or metrics.jsonl)"));
  }
  return RunDir(trimmed);
}

std::string RunDir::log_path(const std::string& service) const {
  return absl::StrCat(logs_dir(), "/", service, ".log");
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot write ", temporary, ": ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      unlink(temporary.c_str());
      return absl::InternalError(
          absl::StrCat("cannot write ", temporary, ": ", std::strerror(error)));
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(temporary.c_str());
    return absl::InternalError(
        absl::StrCat("cannot flush ", temporary, ": ", std::strerror(errno)));
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temporary.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status WriteSummary(const RunDir& run, const nlohmann::json& summary) {
  return WriteFileAtomically(run.summary_path(), summary.dump(2) + "\n");
}

absl::StatusOr<nlohmann::json> ReadSummary(const RunDir& run) {
  std::ifstream file(run.summary_path());
  if (!file) return absl::NotFoundError(absl::StrCat("no summary: ", run.summary_path()));
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json summary = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded() || !summary.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(run.summary_path(), ": not a JSON object"));
  }
  return summary;
}

}  // namespace lockstep::orchestrator
