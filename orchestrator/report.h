// `lockstep report RUN_DIR`: one self-contained HTML page about a run — reward and accuracy
// curves, parity per step (tokens compared / mismatched, max |Δ logprob|), generation and
// training throughput, the step-time split (generate / reward / train / sync / idle, stacked),
// staleness (histogram of policy ages and the per-step maximum), loss and grad norm, and the
// summary table. Inline SVG and CSS only: no script, no network, no external font.
//
// Works on any metrics.jsonl (step_record.h): a chart whose data is absent is left out.
// Pure functions plus file I/O on the paths given: thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_REPORT_H_
#define LOCKSTEP_ORCHESTRATOR_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "orchestrator/job_summary.h"
#include "orchestrator/step_record.h"

namespace lockstep::orchestrator {

// The page for `records` (metrics.jsonl, in order) and `summary` (summary.json; nullopt when
// the run has none yet). `title` names the run.
std::string RenderReportHtml(const std::string& title, const std::vector<StepRecord>& records,
                             const std::optional<JobSummary>& summary);

// Reads RUN_DIR/metrics.jsonl (and summary.json, config.toml's presence is not needed) and
// writes the page to `out_path` (default RUN_DIR/report.html) atomically. Returns the path
// written. NotFound when the run directory or its metrics file is missing.
absl::StatusOr<std::string> WriteReport(const std::string& run_dir,
                                        const std::string& out_path = "");

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_REPORT_H_
