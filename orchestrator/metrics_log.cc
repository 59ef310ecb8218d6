#include "orchestrator/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "orchestrator/run_dir.h"

namespace lockstep::orchestrator {

absl::StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "ae");
  if (file == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot open metrics file ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsLog>(new MetricsLog(path, file));
}

MetricsLog::~MetricsLog() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

absl::Status MetricsLog::Append(const nlohmann::json& record) {
  if (!record.is_object()) {
    return absl::InvalidArgumentError("a metrics record must be a JSON object");
  }
  const std::string line = record.dump() + "\n";
  absl::MutexLock lock(&mu_);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot append to ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<nlohmann::json>> ReadMetrics(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("no metrics file: ", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(std::move(line));
  std::vector<nlohmann::json> records;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json record = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) {
      if (i + 1 == lines.size()) break;  // torn last line
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", i + 1, ": not a JSON object: ", lines[i].substr(0, 80)));
    }
    records.push_back(std::move(record));
  }
  return records;
}

absl::Status TruncateMetricsAfterStep(const std::string& path, int64_t last_step) {
  absl::StatusOr<std::vector<nlohmann::json>> records = ReadMetrics(path);
  if (absl::IsNotFound(records.status())) return absl::OkStatus();
  if (!records.ok()) return records.status();
  std::string kept;
  for (const nlohmann::json& record : *records) {
    const nlohmann::json* step = record.contains("step") ? &record["step"] : nullptr;
    if (step != nullptr && step->is_number() && step->get<int64_t>() > last_step) continue;
    kept += record.dump() + "\n";
  }
  return WriteFileAtomically(path, kept);
}

}  // namespace lockstep::orchestrator
