// `lockstep diagnose runs/<name>`: replays the rollouts a run recorded as mismatched. The
// records of one step (the first step with records unless asked) share a weight version and
// the services' settings; path B is the generator's path in the recorded generator mode and
// threads, path A the trainer's forward in the recorded trainer mode and threads. The report
// says whether B gave back the recorded generator log-probs bit for bit (ReplayCheck), then
// compares A and B as Diagnose does.
#ifndef LOCKSTEP_DIAGNOSE_REPLAY_H_
#define LOCKSTEP_DIAGNOSE_REPLAY_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "diagnose/diagnose_report.h"

namespace lockstep::diagnose {

struct ReplayRequest {
  std::filesystem::path run_dir;
  std::optional<int64_t> step;  // default: the first step with records
  std::string a_overrides, b_overrides;  // "key=value,..." on top of the recorded settings
  int64_t top_k = 5;
  std::function<void(const std::string&)> progress;
};

// Errors: NotFound when the run has no records (or none of `step`), InvalidArgument for a bad
// record file or a weights folder that is missing, the model loader's errors.
absl::StatusOr<DiagnoseReport> ReplayRun(const ReplayRequest& request);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_REPLAY_H_
