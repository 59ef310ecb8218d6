// The run directory of a job, <output_root>/<name>/:
//   config.toml           the resolved config (WriteResolvedConfig)
//   metrics.jsonl         one step record per RL step (metrics_log.h, step_record.h)
//   summary.json          the job summary (job_summary.h), written atomically at the end
//   logs/<service>.log    stdout + stderr of each child process
//   checkpoints/          the trainer's step directories
//   auth_token            the job's bearer token (mode 0600)
//   runs                  how many runs of `lockstep run` the job has started (StartRun)
// plus files the job keeps for itself (model/, trainer_options.json, eval_before.json).
//
// Thread-compatible value type; the functions touch only the paths they are given.
#ifndef LOCKSTEP_ORCHESTRATOR_RUN_DIR_H_
#define LOCKSTEP_ORCHESTRATOR_RUN_DIR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "orchestrator/job_summary.h"

namespace lockstep::orchestrator {

class RunDir {
 public:
  // Creates <root>/<name>/ with logs/ and checkpoints/. AlreadyExists (naming the directory
  // and suggesting --resume or another job.name) when it already holds a run (a metrics.jsonl
  // or summary.json); an existing directory without one (a job that failed before its first
  // step) is fine.
  static absl::StatusOr<RunDir> Create(const std::string& root, const std::string& name);

  // An existing run directory (for --resume and `lockstep report`); NotFound naming the path
  // when it is not a directory or has no config.toml / metrics.jsonl.
  static absl::StatusOr<RunDir> Open(const std::string& path);

  // Counts one more run of the job (the `runs` file, written atomically) and returns its
  // number: 1 for the first run, 2 for the first resume, and so on.
  absl::StatusOr<int64_t> StartRun() const;

  const std::string& path() const { return path_; }
  std::string config_path() const { return path_ + "/config.toml"; }
  std::string metrics_path() const { return path_ + "/metrics.jsonl"; }
  std::string summary_path() const { return path_ + "/summary.json"; }
  std::string logs_dir() const { return path_ + "/logs"; }
  std::string log_path(const std::string& service) const;  // logs/<service>.log
  std::string checkpoints_dir() const { return path_ + "/checkpoints"; }
  std::string auth_token_path() const { return path_ + "/auth_token"; }
  std::string model_dir() const { return path_ + "/model"; }
  std::string trainer_options_path() const { return path_ + "/trainer_options.json"; }
  std::string eval_before_path() const { return path_ + "/eval_before.json"; }
  std::string runs_path() const { return path_ + "/runs"; }

 private:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// summary.json (pretty-printed, atomically) and back. ReadSummary: NotFound when the run has
// none; InvalidArgument when it is not a JSON object of the summary's shape.
absl::Status WriteSummary(const RunDir& run, const JobSummary& summary);
absl::StatusOr<JobSummary> ReadSummary(const RunDir& run);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_RUN_DIR_H_
