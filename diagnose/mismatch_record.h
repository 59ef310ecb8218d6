// One rollout whose trainer and generator log-probs were not bit-identical, as a run records it
// under runs/<name>/mismatches/ (one file per step, step-<N>.jsonl, one record a line, written
// atomically) for `lockstep diagnose runs/<name>` to replay. No LibTorch here: the
// orchestrator writes these.
#ifndef LOCKSTEP_DIAGNOSE_MISMATCH_RECORD_H_
#define LOCKSTEP_DIAGNOSE_MISMATCH_RECORD_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::diagnose {

struct MismatchRecord {
  int64_t step = 0;
  int64_t rollout = 0;  // index in the step's batch
  int64_t weight_version = 0;
  // Directory (Hugging Face layout) holding the weights of weight_version; relative paths are
  // relative to the run directory.
  std::string weights_dir;
  std::vector<int64_t> prompt_tokens, completion_tokens;
  std::vector<float> generator_logprobs;  // one per completion token
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  std::string generator_mode = "batch_invariant";
  int generator_threads = 0;
  std::string trainer_mode = "batch_invariant";
  int trainer_threads = 0;
};

nlohmann::json MismatchRecordToJson(const MismatchRecord& record);
// InvalidArgument naming the missing or mistyped key.
absl::StatusOr<MismatchRecord> MismatchRecordFromJson(const nlohmann::json& json);

// The folder of a run's records, and the file of one step's.
std::filesystem::path MismatchDir(const std::filesystem::path& run_dir);
std::filesystem::path MismatchFile(const std::filesystem::path& run_dir, int64_t step);
// Where the weights of `weight_version` are kept, relative to the run directory (the form a
// record's weights_dir takes).
std::filesystem::path MismatchWeightsDir(int64_t weight_version);

// Writes one step's records (atomically: temp file, fsync, rename). Records of a step written
// again replace the old file.
absl::Status WriteMismatchRecords(const std::filesystem::path& run_dir, int64_t step,
                                  const std::vector<MismatchRecord>& records);

// Every record under the run's mismatches/ folder, by step. NotFound when the folder holds no
// record; InvalidArgument naming file and line for a line that is not a whole record (a
// truncated file, say).
absl::StatusOr<std::vector<MismatchRecord>> ReadMismatchRecords(
    const std::filesystem::path& run_dir);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_MISMATCH_RECORD_H_
