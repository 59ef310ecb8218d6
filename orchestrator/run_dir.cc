#include "orchestrator/run_dir.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;

// A run has started steps (metrics.jsonl) or ended (summary.json); a directory where a job
// failed before its first step (config.toml only) may be reused.
bool HoldsRun(const fs::path& dir) {
  return fs::exists(dir / "metrics.jsonl") || fs::exists(dir / "summary.json");
}

// What `lockstep report` and --resume can open.
bool IsRunDirectory(const fs::path& dir) {
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
  if (!fs::is_directory(trimmed) || !IsRunDirectory(trimmed)) {
    return absl::NotFoundError(absl::StrCat(
        "no run directory at ", path, " (expected a folder holding config.toml or metrics.jsonl)"));
  }
  return RunDir(trimmed);
}

absl::StatusOr<int64_t> RunDir::StartRun() const {
  int64_t runs = 0;
  absl::StatusOr<std::string> text = ReadFile(runs_path());
  if (text.ok()) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &runs) || runs < 0) {
      return absl::DataLossError(absl::StrCat(runs_path(), ": not a count of runs"));
    }
  } else if (!absl::IsNotFound(text.status())) {
    return text.status();
  }
  if (absl::Status s = WriteFileAtomically(runs_path(), absl::StrCat(runs + 1, "\n")); !s.ok()) {
    return s;
  }
  return runs + 1;
}

std::string RunDir::log_path(const std::string& service) const {
  return absl::StrCat(logs_dir(), "/", service, ".log");
}

absl::Status WriteSummary(const RunDir& run, const JobSummary& summary) {
  return WriteFileAtomically(run.summary_path(), SummaryText(summary));
}

absl::StatusOr<JobSummary> ReadSummary(const RunDir& run) {
  absl::StatusOr<std::string> text = ReadFile(run.summary_path());
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("no summary: ", run.summary_path()));
  }
  if (!text.ok()) return text.status();
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(run.summary_path(), ": not a JSON object"));
  }
  try {
    return json.get<JobSummary>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(run.summary_path(), ": ", e.what()));
  }
}

}  // namespace lockstep::orchestrator
