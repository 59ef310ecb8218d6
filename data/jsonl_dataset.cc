#include "data/jsonl_dataset.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::StatusOr<Dataset> LoadJsonlDataset(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open dataset ", path.string()));
  std::vector<Example> examples;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto error = [&](const std::string& message) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ":", line_number, ": ", message));
    };
    nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) return error("not valid JSON");
    absl::StatusOr<Example> example = ParseExample(object);
    if (!example.ok()) return error(std::string(example.status().message()));
    example->line_number = line_number;
    examples.push_back(*std::move(example));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("read error in ", path.string()));
  if (examples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset ", path.string(), " has no examples"));
  }
  return Dataset(std::move(examples), path.string());
}

}  // namespace lockstep
