// What the RL loop needs to survive a dead generator: who died (and how), which incarnation of
// a generator a call went to, and a restart that brings the dead back with the current weights.
// JobServices implements it over the process supervisor and the weight-sync group; tests may
// fake it.
//
//   for (const GeneratorDeath& death : recovery.TakeDeaths()) dead.push_back(death);
//   absl::Status s = recovery.RestartGenerators(dead, weight_version);
//   if (IsRestartBudgetSpent(s)) ... checkpoint, stop cleanly ...
//   services.generators = recovery.generators();  // the restarted ones have new clients
//
// Thread safety: call from the loop thread (restarts start child processes, whose parent-death
// signal follows the starting thread).
#ifndef LOCKSTEP_ORCHESTRATOR_GENERATOR_RECOVERY_H_
#define LOCKSTEP_ORCHESTRATOR_GENERATOR_RECOVERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/step_record.h"

namespace lockstep::orchestrator {

struct GeneratorDeath {
  int64_t generator = 0;  // index into generators()
  std::string name;       // "generator1"
  std::string how;        // "was killed by signal 9 (Killed)"
  absl::Time time;        // when it was reaped
};

class GeneratorRecovery {
 public:
  virtual ~GeneratorRecovery() = default;

  // Generators that died since the last call, each death once, oldest first. An
  // implementation may restart other services it owns here (JobServices: reward servers).
  virtual std::vector<GeneratorDeath> TakeDeaths() = 0;

  // Waits up to `timeout` for the current process of generator `g` to be dead; its death (also
  // reported by TakeDeaths), or nullopt while it runs.
  virtual std::optional<GeneratorDeath> WaitForDeath(int64_t g, absl::Duration timeout) = 0;

  // The incarnation of generator `g`: 0 for the first process, +1 per restart. A call that went
  // to an older incarnation was lost with it.
  virtual int64_t incarnation(int64_t g) const = 0;

  // Restarts every generator in `dead` (within its budget, after its backoff), re-forms the
  // weight-sync group with them and sends weights `weight_version` (the trainer's current
  // version) to every generator; returns once all hold it. ResourceExhausted with the
  // restart-budget payload (IsRestartBudgetSpent) naming the generator and its cause once a
  // budget is spent; other errors as the start, the group or the sync give them.
  virtual absl::Status RestartGenerators(const std::vector<GeneratorDeath>& dead,
                                         int64_t weight_version) = 0;

  // The clients of the generators now (a restarted generator has a new one; the old stays valid
  // for calls still in flight).
  virtual std::vector<GeneratorClient*> generators() const = 0;

  // Restarts so far, per service name.
  virtual std::map<std::string, int64_t> restarts() const = 0;

  // The restarts (of any service) done since the last call, oldest first, each once.
  virtual std::vector<RestartRecord> TakeRestartRecords() { return {}; }
};

// The error RestartGenerators returns once a restart budget is spent: the job checkpoints and
// stops cleanly.
absl::Status RestartBudgetSpentError(const std::string& message);
bool IsRestartBudgetSpent(const absl::Status& status);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_GENERATOR_RECOVERY_H_
