#include "orchestrator/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"

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

std::string MetricsLineText(const StepRecord& record) {
  nlohmann::json json = record;
  DropNullMembers(json);
  return json.dump();
}

absl::Status MetricsLog::Append(const StepRecord& record) {
  const std::string line = MetricsLineText(record) + "\n";
  absl::MutexLock lock(&mu_);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot append to ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// The records of a metrics file with the line each came from.
struct ParsedLine {
  StepRecord record;
  absl::string_view text;
};

absl::StatusOr<std::vector<ParsedLine>> ParseMetrics(const std::string& path,
                                                     const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<ParsedLine> records;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    nlohmann::json json = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    std::string problem;
    if (json.is_discarded() || !json.is_object()) {
      if (i + 1 == lines.size()) break;  // torn last line
      problem = "not a JSON object";
    } else {
      try {
        records.push_back({json.get<StepRecord>(), lines[i]});
        continue;
      } catch (const nlohmann::json::exception& e) {
        problem = e.what();
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", i + 1, ": ", problem, ": ", lines[i].substr(0, 80)));
  }
  return records;
}

}  // namespace

absl::StatusOr<std::vector<StepRecord>> ReadMetrics(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("no metrics file: ", path));
  }
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<ParsedLine>> lines = ParseMetrics(path, *text);
  if (!lines.ok()) return lines.status();
  std::vector<StepRecord> records;
  for (ParsedLine& line : *lines) records.push_back(std::move(line.record));
  return records;
}

absl::StatusOr<std::vector<StepRecord>> TruncateMetricsAfterStep(const std::string& path,
                                                                 int64_t last_step) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (absl::IsNotFound(text.status())) return std::vector<StepRecord>();
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<ParsedLine>> lines = ParseMetrics(path, *text);
  if (!lines.ok()) return lines.status();
  // Kept lines are written back as they were (keys this build does not know included).
  std::vector<StepRecord> kept;
  std::string out;
  for (ParsedLine& line : *lines) {
    if (line.record.step > last_step) continue;
    absl::StrAppend(&out, line.text, "\n");
    kept.push_back(std::move(line.record));
  }
  if (absl::Status s = WriteFileAtomically(path, out); !s.ok()) return s;
  return kept;
}

}  // namespace lockstep::orchestrator
