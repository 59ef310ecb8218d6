// The prompt ledger of a run: every prompt the RL loop issued is accounted for, whatever died on
// the way. A prompt whose generator died is generated again (resubmitted, with the same seed)
// and then counts once, where it ends:
//     issued = trained + dropped_by_policy + failed + in_flight
// (in_flight: issued but not trained when the run ended, 0 after a completed job; a stopped
// run's are issued again by the run that resumes it). `resubmitted` counts generation calls
// made again, so generation calls = issued + resubmitted.
#ifndef LOCKSTEP_ORCHESTRATOR_PROMPT_LEDGER_H_
#define LOCKSTEP_ORCHESTRATOR_PROMPT_LEDGER_H_

#include <cstdint>

#include "nlohmann/json.hpp"

namespace lockstep::orchestrator {

struct PromptLedger {
  int64_t issued = 0;             // prompts submitted for generation (each once)
  int64_t trained = 0;            // in a train batch with at least one sample trained on
  int64_t dropped_by_policy = 0;  // every group dropped by the advantage policy (no variance)
  int64_t failed = 0;             // every reward item failed
  int64_t in_flight = 0;          // issued, not yet trained, when the run ended
  int64_t resubmitted = 0;        // generation calls made again after their generator died

  // True iff the identity above holds.
  bool Balanced() const { return issued == trained + dropped_by_policy + failed + in_flight; }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PromptLedger, issued, trained, dropped_by_policy,
                                                failed, in_flight, resubmitted)

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_PROMPT_LEDGER_H_
