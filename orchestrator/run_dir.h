// The run directory of a job, <output_root>/<name>/:
//   config.toml          the resolved config (WriteResolvedConfig)
//   metrics.jsonl        one JSON object per RL step (metrics_log.h)
//   summary.json         written atomically at the end
//   logs/<service>.log   stdout + stderr of each child process
//   checkpoints/         the trainer's step directories
//   auth_token           the job's bearer token (mode 0600)
// plus files the job keeps for itself (model/, trainer_options.json, eval_before.json).
//
// Thread-compatible value type; the functions touch only the paths they are given.
#ifndef LOCKSTEP_ORCHESTRATOR_RUN_DIR_H_
#define LOCKSTEP_ORCHESTRATOR_RUN_DIR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::orchestrator {

class RunDir {
 public:
  // Creates <root>/<name>/ with logs/ and checkpoints/. AlreadyExists (naming the directory
  // and suggesting --resume or another job.name) when it already holds a run (a config.toml or
  // metrics.jsonl); an empty existing directory is fine.
  static absl::StatusOr<RunDir> Create(const std::string& root, const std::string& name);

  // An existing run directory (for --resume and `lockstep report`); NotFound naming the path
  // when it is not a directory or has no config.toml / metrics.jsonl.
  static absl::StatusOr<RunDir> Open(const std::string& path);

  const std::string& path() const { return path_; }
  std::string config_path() const { return path_ + "/config.toml"; }
  std::string metrics_path() const { return path_ + "/metrics.jsonl"; }
  std::string summary_path() const { return path_ + "/summary.json"; }
  std::string logs_dir() const { return path_ + "/logs"; }
  std::string log_path(const std::string& service) const;  // logs/<service>.log
  std::string checkpoints_dir() const { return path_ + "/checkpoints"; }
  std::string auth_token_path() const { return path_ + "/auth_token"; }
  std::string model_dir() const { return path_ + "/model"; }

 private:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Writes `contents` to `path` through a temporary file in the same directory, flushed to disk
// and renamed over the target, so that readers see the old or the new file, never a part.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

// summary.json (pretty-printed, atomically) and back.
absl::Status WriteSummary(const RunDir& run, const nlohmann::json& summary);
absl::StatusOr<nlohmann::json> ReadSummary(const RunDir& run);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_RUN_DIR_H_
