#include "data/jsonl_dataset.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/tokenizer/utf8.h"

namespace lockstep {

absl::StatusOr<Dataset> LoadJsonlDataset(const std::filesystem::path& path,
                                         const DatasetFields& fields) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open dataset ", path.string()));
  std::vector<Example> examples;
  std::string line;
  int64_t line_number = 0;
  constexpr size_t kMaxListed = 10;
  std::vector<std::string> problems;
  int64_t num_bad = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // Every bad line is counted; the first kMaxListed are named.
    const auto error = [&](const std::string& message) {
      if (problems.size() < kMaxListed) {
        problems.push_back(absl::StrCat(path.string(), ":", line_number, ": ", message));
      }
      ++num_bad;
    };
    if (size_t bad = FindInvalidUtf8(line); bad != std::string::npos) {
      error(absl::StrCat("not valid UTF-8 (byte ", bad + 1, " of the line)"));
      continue;
    }
    nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) {
      error("not valid JSON");
      continue;
    }
    absl::StatusOr<Example> example = ParseExample(object, fields);
    if (!example.ok()) {
      error(std::string(example.status().message()));
      continue;
    }
    example->line_number = line_number;
    examples.push_back(*std::move(example));
  }
  if (num_bad > 0) {
    std::string message = absl::StrJoin(problems, "\n");
    if (num_bad > static_cast<int64_t>(problems.size())) {
      absl::StrAppend(&message, "\n... ", num_bad - static_cast<int64_t>(problems.size()),
                      " more bad lines (", num_bad, " in all)");
    }
    return absl::InvalidArgumentError(message);
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("read error in ", path.string()));
  if (examples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset ", path.string(), " has no examples"));
  }
  return Dataset(std::move(examples), path.string());
}

}  // namespace lockstep
