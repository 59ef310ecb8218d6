#include "diagnose/mismatch_record.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_io.h"

namespace lockstep::diagnose {
namespace {

template <typename T>
absl::Status Take(const nlohmann::json& json, const char* key, T* out) {
  auto it = json.find(key);
  if (it == json.end()) {
    return absl::InvalidArgumentError(absl::StrCat("mismatch record: key '", key, "' is missing"));
  }
  try {
    *out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat("mismatch record: key '", key, "' has the wrong type"));
  }
  return absl::OkStatus();
}

}  // namespace

nlohmann::json MismatchRecordToJson(const MismatchRecord& r) {
  return {{"step", r.step},
          {"rollout", r.rollout},
          {"weight_version", r.weight_version},
          {"weights_dir", r.weights_dir},
          {"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"generator_logprobs", r.generator_logprobs},
          {"temperature", r.temperature},
          {"top_k", r.top_k},
          {"top_p", r.top_p},
          {"generator", {{"mode", r.generator_mode}, {"threads", r.generator_threads}}},
          {"trainer", {{"mode", r.trainer_mode}, {"threads", r.trainer_threads}}}};
}

absl::StatusOr<MismatchRecord> MismatchRecordFromJson(const nlohmann::json& json) {
  if (!json.is_object()) return absl::InvalidArgumentError("mismatch record: not an object");
  MismatchRecord r;
  absl::Status s = Take(json, "step", &r.step);
  if (s.ok()) s = Take(json, "rollout", &r.rollout);
  if (s.ok()) s = Take(json, "weight_version", &r.weight_version);
  if (s.ok()) s = Take(json, "weights_dir", &r.weights_dir);
  if (s.ok()) s = Take(json, "prompt_tokens", &r.prompt_tokens);
  if (s.ok()) s = Take(json, "completion_tokens", &r.completion_tokens);
  if (s.ok()) s = Take(json, "generator_logprobs", &r.generator_logprobs);
  if (s.ok()) s = Take(json, "temperature", &r.temperature);
  if (s.ok()) s = Take(json, "top_k", &r.top_k);
  if (s.ok()) s = Take(json, "top_p", &r.top_p);
  nlohmann::json generator, trainer;
  if (s.ok()) s = Take(json, "generator", &generator);
  if (s.ok()) s = Take(json, "trainer", &trainer);
  if (s.ok()) s = Take(generator, "mode", &r.generator_mode);
  if (s.ok()) s = Take(generator, "threads", &r.generator_threads);
  if (s.ok()) s = Take(trainer, "mode", &r.trainer_mode);
  if (s.ok()) s = Take(trainer, "threads", &r.trainer_threads);
  if (!s.ok()) return s;
  if (r.prompt_tokens.empty() || r.completion_tokens.empty()) {
    return absl::InvalidArgumentError("mismatch record: empty prompt or completion");
  }
  if (r.generator_logprobs.size() != r.completion_tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mismatch record: ", r.generator_logprobs.size(), " generator log-probs for ",
        r.completion_tokens.size(), " completion tokens"));
  }
  return r;
}

std::filesystem::path MismatchDir(const std::filesystem::path& run_dir) {
  return run_dir / "mismatches";
}

std::filesystem::path MismatchWeightsDir(int64_t weight_version) {
  return MismatchDir("") / absl::StrCat("weights-v", weight_version);
}

std::filesystem::path MismatchFile(const std::filesystem::path& run_dir, int64_t step) {
  return MismatchDir(run_dir) / absl::StrFormat("step-%06d.jsonl", step);
}

absl::Status WriteMismatchRecords(const std::filesystem::path& run_dir, int64_t step,
                                  const std::vector<MismatchRecord>& records) {
  std::error_code error;
  std::filesystem::create_directories(MismatchDir(run_dir), error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", MismatchDir(run_dir).string(), ": ",
                                            error.message()));
  }
  std::string text;
  for (const MismatchRecord& record : records) {
    absl::StrAppend(&text, MismatchRecordToJson(record).dump(), "\n");
  }
  return WriteFileAtomically(MismatchFile(run_dir, step).string(), text);
}

absl::StatusOr<std::vector<MismatchRecord>> ReadMismatchRecords(
    const std::filesystem::path& run_dir) {
  const std::filesystem::path dir = MismatchDir(run_dir);
  std::vector<std::filesystem::path> files;
  std::error_code error;
  if (std::filesystem::is_directory(dir, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<MismatchRecord> records;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    int64_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.empty()) continue;
      nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (json.is_discarded()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file.string(), ":", number, ": not a whole JSON record (a truncated file?)"));
      }
      absl::StatusOr<MismatchRecord> record = MismatchRecordFromJson(json);
      if (!record.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file.string(), ":", number, ": ", record.status().message()));
      }
      records.push_back(*std::move(record));
    }
  }
  if (records.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no mismatch records under ", dir.string(),
        " (a run writes them when parity = \"report\" or \"strict\" finds mismatched tokens)"));
  }
  return records;
}

}  // namespace lockstep::diagnose
