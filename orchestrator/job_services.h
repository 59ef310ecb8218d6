// The services of a job: the trainer, the generators and the reward / environment servers,
// started as supervised children on loopback (or reached at the addresses the config gives),
// waited for until they serve, and joined into one weight-sync group {trainer rank 0,
// generators 1..N}.
//
//   JobServices services(config);
//   services.Start(launch, log);        // children start in parallel; then waits for each
//   services.FormWeightSyncGroup(log);
//   ... services.trainer(), services.generators(), services.rewards() ...
//   services.Sync(version);             // weights of `version` to every generator
//   services.StartRestarts(dead);       // GeneratorRecovery: new processes load meanwhile
//   services.PollRestarts(version);     // … back with the weights once they all serve
//   services.StopAll();                 // also the destructor's job
//
// A child that dies is named on stderr the moment it is reaped (from the supervisor's watcher
// thread). Started generators are restarted within `[generator] max_restarts` each.
//
// Thread safety: call from the job's main thread (the children's parent-death signal follows
// the thread that started them); the clients it hands out are thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_JOB_SERVICES_H_
#define LOCKSTEP_ORCHESTRATOR_JOB_SERVICES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/config.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/generator_recovery.h"
#include "orchestrator/job_rewards.h"
#include "orchestrator/process_supervisor.h"
#include "orchestrator/trainer_client.h"

namespace lockstep::orchestrator {

// What the children are started from.
struct ServiceLaunch {
  std::string lockstep_binary;       // `lockstep serve …` runs this executable
  std::string model_dir;             // the model the trainer and the generators load
  std::string trainer_options_path;  // the trainer's JSON options
  std::string resume_checkpoint;     // non-empty: the trainer resumes from this directory
  std::string auth_token;
  std::string auth_token_path;  // the same token, in the file the children read
  std::string logs_dir;         // <logs_dir>/<child>.log
  std::string checkpoints_dir;  // where a restarted trainer resumes from
};

class JobServices final : public GeneratorRecovery {
 public:
  using Log = std::function<void(const std::string&)>;

  explicit JobServices(const JobConfig& config) : config_(config), rewards_(config) {}
  ~JobServices() override { StopAll(); }

  // Starts the children the config asks for (trainer, generators, reward and environment
  // servers), waits until each serves, and connects a client to every service. Errors name the
  // child that failed and quote its log.
  absl::Status Start(const ServiceLaunch& launch, const Log& log);

  // Forms the weight-sync group over the trainer and the generators (again: a new group name
  // and store port, every member re-joins).
  absl::Status FormWeightSyncGroup(const Log& log);

  // Sends the trainer's weights of `version` to every generator (bounded by the group timeout).
  absl::Status Sync(int64_t version);

  // True iff the trainer this job started is dead, or dies within `wait`.
  bool TrainerDied(absl::Duration wait);
  // Starts the dead trainer again, from the run's last checkpoint when there is one, within
  // [trainer] max_restarts (RestartBudgetSpentError once spent), connects to it, restarts the
  // generators that died too (the loop had not seen it yet) and re-forms the weight-sync group.
  // The caller rolls the job back to the checkpoint (Job::Resume).
  absl::Status RestartTrainer();

  // Stops every child (SIGTERM, grace, SIGKILL). Safe to call more than once.
  void StopAll() { supervisor_.StopAll(); }

  // GeneratorRecovery. Only generators this job started can die or be restarted. TakeDeaths
  // also restarts the reward and environment servers this job started that died (blocking
  // until each serves again, on the same port).
  std::vector<GeneratorDeath> TakeDeaths() override;
  std::optional<GeneratorDeath> WaitForDeath(int64_t g, absl::Duration timeout) override;
  int64_t incarnation(int64_t g) const override { return incarnations_[g]; }
  absl::Status StartRestarts(const std::vector<GeneratorDeath>& dead) override;
  absl::StatusOr<std::vector<GeneratorDeath>> PollRestarts(int64_t weight_version) override;
  bool restarting(int64_t g) const override { return restarting_.count(g) > 0; }
  int64_t num_restarting() const override { return static_cast<int64_t>(restarting_.size()); }
  std::vector<GeneratorClient*> generators() const override { return generators_; }
  std::map<std::string, int64_t> restarts() const override { return restarts_; }
  std::vector<RestartRecord> TakeRestartRecords() override {
    return std::exchange(restart_records_, {});
  }

  TrainerClient& trainer() const { return *trainer_; }
  JobRewards& rewards() { return rewards_; }

 private:
  // Restarts a reward or environment server that died, within [rewards] max_restarts; logs
  // what it did (a failed or refused restart leaves its items failing, counted).
  void RestartSideService(const ChildExit& exit);
  // A generator coming back: when its new process may start (backoff), whether it has, and the
  // address it serves on once it does.
  struct GeneratorRestart {
    GeneratorDeath death;
    absl::Time not_before;
    bool started = false;
    absl::Time started_at;
    std::string address;  // non-empty once it serves
  };
  // Counts a restart of `death.generator` against its budget (RestartBudgetSpentError once
  // spent) and schedules its process after the backoff: at once, then 1 s, 2 s, 4 s (at most 8).
  absl::Status ScheduleRestart(const GeneratorDeath& death);
  // One pass over restarting_ without waiting: starts the processes due, notes those that serve
  // (a new client each), schedules again one that died while loading. True iff all serve.
  absl::StatusOr<bool> AdvanceRestarts();
  // AdvanceRestarts until every restarting generator serves; returns them (restarting_ is
  // cleared: the caller re-forms the group).
  absl::StatusOr<std::vector<GeneratorDeath>> AwaitRestartsServing();
  // `lockstep serve trainer …`, resuming from `resume_dir` when non-empty.
  std::vector<std::string> TrainerArgv(const std::string& resume_dir) const;
  // Generator index of a started generator's child name, or -1.
  static int64_t GeneratorIndex(const std::string& name);

  const JobConfig& config_;
  ProcessSupervisor supervisor_;
  Log log_;
  ServiceLaunch launch_;
  std::string auth_token_;
  std::unique_ptr<TrainerClient> trainer_;
  // Every client ever made (a dead generator's stays valid for its calls still in flight).
  std::vector<std::unique_ptr<GeneratorClient>> generator_clients_;
  std::vector<GeneratorClient*> generators_;  // the current one of each generator
  std::vector<int64_t> incarnations_;
  std::map<int64_t, GeneratorRestart> restarting_;  // by generator index
  std::map<std::string, int64_t> restarts_;
  std::vector<RestartRecord> restart_records_;  // not yet taken
  JobRewards rewards_;  // reward servers, the environment, the weighted reward pipeline
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_JOB_SERVICES_H_
