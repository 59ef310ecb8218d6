// One RL job from start to end, as `lockstep run` drives it:
//
//   run directory → model (+ tokenizer) from a preset → per-job auth token → start trainer and
//   generators (ProcessSupervisor, loopback, --auth-token-file) → wait for health → form the
//   weight-sync group → SFT warm start (Trainer.SftStep, then sync) → eval before RL (greedy,
//   held-out) → RlLoop (checkpoint every K steps) → final checkpoint → eval after RL →
//   summary.json and a short table → stop every child.
//
// Resume (`lockstep run --resume runs/<name>`): the resolved config of the run directory, the
// trainer restarted from the last checkpoint (weights, optimizer, RNG, step), the RL loop from
// the checkpoint's data cursor; metrics.jsonl loses the records after the checkpoint's step
// (those steps run again), and the summary covers every step of the job (job_summary.h). On
// CPU, on-policy and batch-invariant, the resumed run ends with weights bit-identical to an
// uninterrupted one.
//
// Ctrl-C (SIGINT/SIGTERM): the loop stops between steps, a checkpoint is written, the children
// are stopped, and RunJob returns Cancelled.
//
// Thread safety: RunJob runs on the calling thread (which must live as long as the job: the
// children's parent-death signal follows it).
#ifndef LOCKSTEP_ORCHESTRATOR_JOB_H_
#define LOCKSTEP_ORCHESTRATOR_JOB_H_

#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/config.h"
#include "orchestrator/job_summary.h"

namespace lockstep::orchestrator {

struct JobRunOptions {
  std::string lockstep_binary;  // the `lockstep` executable the services are started from
  std::string resume_dir;       // non-empty: resume this run directory
};

// Runs the job; returns the summary (also written to <run dir>/summary.json). Errors stop the
// job with every child stopped; the message names what failed.
absl::StatusOr<JobSummary> RunJob(const JobConfig& config, const JobRunOptions& options);

// <output_root>/<name> of a config.
std::string RunDirectory(const JobConfig& config);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_JOB_H_
