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
//   services.StopAll();                 // also the destructor's job
//
// Thread safety: call from the job's main thread (the children's parent-death signal follows
// the thread that started them); the clients it hands out are thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_JOB_SERVICES_H_
#define LOCKSTEP_ORCHESTRATOR_JOB_SERVICES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "orchestrator/config.h"
#include "orchestrator/generator_client.h"
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
};

class JobServices {
 public:
  using Log = std::function<void(const std::string&)>;

  explicit JobServices(const JobConfig& config) : config_(config), rewards_(config) {}
  ~JobServices() { StopAll(); }

  // Starts the children the config asks for (trainer, generators, reward and environment
  // servers), waits until each serves, and connects a client to every service. Errors name the
  // child that failed and quote its log.
  absl::Status Start(const ServiceLaunch& launch, const Log& log);

  // Forms the weight-sync group over the trainer and the generators.
  absl::Status FormWeightSyncGroup(const Log& log);

  // Sends the trainer's weights of `version` to every generator (bounded by the group timeout).
  absl::Status Sync(int64_t version);

  // Stops every child (SIGTERM, grace, SIGKILL). Safe to call more than once.
  void StopAll() { supervisor_.StopAll(); }

  TrainerClient& trainer() const { return *trainer_; }
  const std::vector<GeneratorClient*>& generators() const { return generators_; }
  JobRewards& rewards() { return rewards_; }

 private:
  const JobConfig& config_;
  ProcessSupervisor supervisor_;
  std::unique_ptr<TrainerClient> trainer_;
  std::vector<std::unique_ptr<GeneratorClient>> generator_clients_;
  std::vector<GeneratorClient*> generators_;
  JobRewards rewards_;  // reward servers, the environment, the weighted reward pipeline
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_JOB_SERVICES_H_
