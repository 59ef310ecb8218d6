// metrics.jsonl: one JSON object per RL step, appended and flushed line by line so that a
// crash loses at most the line being written, and `lockstep report` can read a live run.
//
// The keys written by the RL loop (orchestrator/rl_loop.cc) and read by the report; every key
// is optional to readers:
//   step, weight_version, reward_mean, accuracy, loss, grad_norm, lr, entropy, ratio_mean,
//   clipped_fraction, samples, reward_items_failed, groups_dropped, rollouts_trained,
//   gen_tokens, gen_tokens_per_s, train_tokens, train_tokens_per_s,
//   parity:    {tokens_compared, tokens_mismatched, max_abs_diff, mean_diff, k3}
//   time:      {generate, reward, train, sync, idle, total}   (seconds of this step)
//   staleness: {"<policy age>": number of samples, …}
//   idle_fraction_trainer, idle_fraction_generator, sync_bytes, swap_pause_ms,
//   sync_trainer_s (the trainer's part of time.sync)
//
// Thread safety: MetricsLog::Append may be called from any thread (one line at a time).
#ifndef LOCKSTEP_ORCHESTRATOR_METRICS_LOG_H_
#define LOCKSTEP_ORCHESTRATOR_METRICS_LOG_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace lockstep::orchestrator {

class MetricsLog {
 public:
  // Opens `path` for appending (created if missing). Internal naming the path on failure.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& path);
  ~MetricsLog();

  // Appends `record` (a JSON object) as one line and flushes it to the OS.
  absl::Status Append(const nlohmann::json& record);

  const std::string& path() const { return path_; }

 private:
  MetricsLog(std::string path, FILE* file) : path_(std::move(path)), file_(file) {}
  const std::string path_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
};

// Every complete record of a metrics file, in order. A torn last line (a crash mid-write) is
// skipped; a malformed line elsewhere is InvalidArgument "PATH:LINE: …". NotFound when missing.
absl::StatusOr<std::vector<nlohmann::json>> ReadMetrics(const std::string& path);

// For a resumed run: drops records whose "step" is greater than `last_step` (steps done after
// the checkpoint that is resumed), rewriting the file atomically.
absl::Status TruncateMetricsAfterStep(const std::string& path, int64_t last_step);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_METRICS_LOG_H_
