// The live console progress line of `lockstep run` (on stderr):
//   step 12/100  reward 0.531  acc 0.610  parity 0/12,034 mismatched  gen 1.2k tok/s  train 3.4k
//   tok/s  ETA 2m31s
// On a terminal the line is redrawn in place with '\r'; otherwise (a log file, CI) each step
// prints one line. Values come from a step record (step_record.h); unset ones are left out.
//
// Thread-compatible: one thread (the loop's callback) drives it.
#ifndef LOCKSTEP_ORCHESTRATOR_PROGRESS_LINE_H_
#define LOCKSTEP_ORCHESTRATOR_PROGRESS_LINE_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "orchestrator/step_record.h"

namespace lockstep::orchestrator {

// The line for `record`, without '\r' or '\n'. `eta` < 0 means unknown (left out).
std::string FormatProgress(const StepRecord& record, int64_t total_steps, absl::Duration eta);

// "950", "1.2k", "3.4M".
std::string HumanCount(double value);

// "45s", "2m31s", "1h02m".
std::string HumanDuration(absl::Duration duration);

class ProgressLine {
 public:
  // `interactive`: redraw in place; default: whether `out` is a terminal. A disabled line
  // prints nothing.
  ProgressLine(int64_t total_steps, FILE* out = stderr, bool enabled = true,
               std::optional<bool> interactive = std::nullopt);

  // Shows the step of `record`; the ETA extrapolates the steps shown since the first Update
  // (so a resumed run does not count the steps it skipped).
  void Update(const StepRecord& record, absl::Time now = absl::Now());

  // Prints `text` on its own line without tearing the progress line (which is redrawn).
  void Message(const std::string& text);

  // Ends the progress line (a newline when one is drawn in place).
  void Finish();

 private:
  int64_t total_steps_;
  FILE* out_;
  bool enabled_;
  bool interactive_;
  std::string last_line_;
  std::optional<int64_t> first_step_;
  absl::Time first_time_;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_PROGRESS_LINE_H_
