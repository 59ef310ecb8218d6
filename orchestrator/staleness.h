// The staleness bound of the asynchronous RL loop, kept by admission control.
//
// Prompts are numbered 0, 1, 2, … in the order they are drawn and trained in that order, P per
// step, so prompt i trains at RL step i / P. Its samples are generated with weights at least as
// new as the generators held when it was submitted. Admitting prompt i only once
//     i / P <= steps_synced + max_staleness                                    (1)
// (steps_synced = RL steps whose weights every generator has received) guarantees that every
// sample trains at most max_staleness versions after the weights it was generated with:
//     age = trainer_version - sample_version <= max_staleness.
// (1) is the same as "at most (S + 1) · P prompts in flight" when sync follows every step. With
// max_staleness = 0 generation and training strictly alternate (fully on-policy).
// CheckSampleAge is the guard behind the bound: a violation is an error, never a silent drop.
//
// Thread safety: AdmissionControl is not synchronised (the loop thread owns it); CheckSampleAge
// is a pure function.
#ifndef LOCKSTEP_ORCHESTRATOR_STALENESS_H_
#define LOCKSTEP_ORCHESTRATOR_STALENESS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"

namespace lockstep::orchestrator {

class AdmissionControl {
 public:
  AdmissionControl(int64_t max_staleness, int64_t prompts_per_step);

  // True iff prompt number `num_admitted()` may be submitted now (rule (1)).
  bool CanAdmit() const;
  // Counts one submitted prompt. Call only when CanAdmit().
  void Admit() { ++num_admitted_; }
  // Counts one RL step whose weights every generator now holds.
  void StepSynced() { ++steps_synced_; }

  int64_t num_admitted() const { return num_admitted_; }
  int64_t steps_synced() const { return steps_synced_; }
  int64_t max_in_flight() const { return (max_staleness_ + 1) * prompts_per_step_; }

 private:
  int64_t max_staleness_;
  int64_t prompts_per_step_;
  int64_t num_admitted_ = 0;
  int64_t steps_synced_ = 0;
};

// OK iff every token version v satisfies 0 <= trainer_version - v <= max_staleness; otherwise
// FailedPrecondition naming the rollout, the token and both versions.
absl::Status CheckSampleAge(int64_t trainer_version, const std::vector<int64_t>& token_versions,
                            int64_t max_staleness, int64_t rollout_index);

// Policy age of a sample: trainer_version minus its oldest token version (0 for no tokens).
int64_t SampleAge(int64_t trainer_version, const std::vector<int64_t>& token_versions);

// Histogram of sample ages: age -> count.
using AgeHistogram = std::map<int64_t, int64_t>;

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_STALENESS_H_
