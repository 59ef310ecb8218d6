// metrics.jsonl: one step record (step_record.h) per RL step, appended and flushed line by line
// so that a crash loses at most the line being written, and `lockstep report` can read a live
// run.
//
// Thread safety: MetricsLog::Append may be called from any thread (one line at a time).
#ifndef LOCKSTEP_ORCHESTRATOR_METRICS_LOG_H_
#define LOCKSTEP_ORCHESTRATOR_METRICS_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "orchestrator/step_record.h"

namespace lockstep::orchestrator {

class MetricsLog {
 public:
  // Opens `path` for appending (created if missing). Internal naming the path on failure.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& path);
  ~MetricsLog();

  // Appends `record` as one line (its set members only) and flushes it to the OS.
  absl::Status Append(const StepRecord& record);

  const std::string& path() const { return path_; }

 private:
  MetricsLog(std::string path, FILE* file) : path_(std::move(path)), file_(file) {}
  const std::string path_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
};

// One line of metrics.jsonl (no newline): the record's set members.
std::string MetricsLineText(const StepRecord& record);

// Every complete record of a metrics file, in order. A torn last line (a crash mid-write) is
// skipped; a malformed line elsewhere (not a JSON object, or a member of the wrong type) is
// InvalidArgument "PATH:LINE: …". NotFound when missing.
absl::StatusOr<std::vector<StepRecord>> ReadMetrics(const std::string& path);

// For a resumed run: drops records whose step is greater than `last_step` (steps done after
// the checkpoint that is resumed), rewriting the file atomically. Returns the records kept; a
// missing file keeps none.
absl::StatusOr<std::vector<StepRecord>> TruncateMetricsAfterStep(const std::string& path,
                                                                 int64_t last_step);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_METRICS_LOG_H_
