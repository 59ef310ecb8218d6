// What the RL loop needs to survive a dead generator: who died (and how), which incarnation of
// a generator a call went to, and restarts that bring the dead back with the current weights.
// JobServices implements it over the process supervisor and the weight-sync group; tests may
// fake it.
//
// A restart runs in the background of the loop: StartRestarts starts the new processes and
// returns; while they load, the live generators keep working and the loop keeps waiting,
// training or scoring; PollRestarts (non-blocking until every restarting process serves) then
// re-forms the weight-sync group and sends the current weights, and the restarted generators
// take work again.
//
//   for (const GeneratorDeath& death : recovery.TakeDeaths()) dead.push_back(death);
//   absl::Status s = recovery.StartRestarts(dead);
//   if (IsRestartBudgetSpent(s)) ... checkpoint, stop cleanly ...
//   ... later, every ~100 ms:
//   absl::StatusOr<std::vector<GeneratorDeath>> back = recovery.PollRestarts(weight_version);
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

  // The incarnation of generator `g`: 0 for the first process, +1 per process started since
  // (one that died while loading counts too). A call that went to an older incarnation was lost
  // with it.
  virtual int64_t incarnation(int64_t g) const = 0;

  // Starts bringing back every generator in `dead` that is not restarting already (within its
  // budget, after its backoff) and returns without waiting for the new processes. From then on
  // the generator is restarting() until PollRestarts has given it the weights. ResourceExhausted
  // with the restart-budget payload (IsRestartBudgetSpent) naming the generator and its cause
  // once a budget is spent; other errors as starting a process gives them.
  virtual absl::Status StartRestarts(const std::vector<GeneratorDeath>& dead) = 0;

  // Moves the restarts on without waiting for a process: starts those whose backoff has passed,
  // starts again (within the budget) one that died while loading. Once every restarting
  // generator serves, re-forms the weight-sync group with them, sends weights `weight_version`
  // (the trainer's current version) to every generator, blocking for that, and returns the
  // generators now back (each once; no longer restarting). Otherwise returns none. Errors as
  // StartRestarts, the group or the sync give them.
  virtual absl::StatusOr<std::vector<GeneratorDeath>> PollRestarts(int64_t weight_version) = 0;

  // True while generator `g` is restarting (dead or loading; no call may go to it).
  virtual bool restarting(int64_t g) const = 0;
  // The number of generators restarting.
  virtual int64_t num_restarting() const = 0;

  // StartRestarts(dead), then PollRestarts until no generator is restarting: returns once every
  // generator holds `weight_version`.
  absl::Status RestartGenerators(const std::vector<GeneratorDeath>& dead, int64_t weight_version);

  // The clients of the generators now (a restarted generator has a new one; the old stays valid
  // for calls still in flight).
  virtual std::vector<GeneratorClient*> generators() const = 0;

  // Restarts so far, per service name.
  virtual std::map<std::string, int64_t> restarts() const = 0;

  // The restarts (of any service) done since the last call, oldest first, each once.
  virtual std::vector<RestartRecord> TakeRestartRecords() { return {}; }
};

// The error StartRestarts, PollRestarts and RestartGenerators return once a restart budget is
// spent: the job checkpoints and stops cleanly.
absl::Status RestartBudgetSpentError(const std::string& message);
bool IsRestartBudgetSpent(const absl::Status& status);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_GENERATOR_RECOVERY_H_
