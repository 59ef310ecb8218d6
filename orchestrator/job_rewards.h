// The reward side of a job: the [[rewards.servers]] and the [environment] a config names,
// started (from `command`, as supervised children: side_services.h) or reached (`address`), and
// what the RL loop scores with: the weighted reward pipeline (reward_pipeline.h) and the
// environment client.
//
//   JobRewards rewards(config);
//   rewards.Launch(supervisor, lockstep_binary, token_file, logs_dir);   // with the trainer and
//   generators
//   ... wait for the trainer and generators ...
//   rewards.Connect(supervisor, token);                 // waits for its children, builds clients
//   RlServices{..., rewards.scorer(), ..., environment rollouts over rewards.environment()}
//
// Thread safety: Launch and Connect on the job's main thread; the scorer and the environment
// are thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_JOB_REWARDS_H_
#define LOCKSTEP_ORCHESTRATOR_JOB_REWARDS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "orchestrator/config.h"
#include "orchestrator/process_supervisor.h"
#include "orchestrator/reward_pipeline.h"
#include "rewards/environment_client.h"

namespace lockstep::orchestrator {

class JobRewards {
 public:
  explicit JobRewards(const JobConfig& config) : config_(config) {}

  // Starts every server given by `command` ("reward_<name>" and "environment" children, logs
  // in `logs_dir`); returns once they have exec'd. A command whose argv[0] is "lockstep" runs
  // `lockstep_binary` (the orchestrator's own executable), so recipes can say
  // ["lockstep", "serve", "environment", "--builtin", "guess_number"].
  absl::Status Launch(ProcessSupervisor& supervisor, const std::string& lockstep_binary,
                      const std::string& token_file, const std::string& logs_dir);

  // Waits until the started servers serve, then builds the reward pipeline and the environment
  // client (all calls carry `auth_token`).
  absl::Status Connect(ProcessSupervisor& supervisor, const std::string& auth_token);

  // The weighted reward pipeline; nullptr when it has no component (an environment-only job).
  WeightedRewardScorer* scorer() const {
    return scorer_ != nullptr && scorer_->num_components() > 0 ? scorer_.get() : nullptr;
  }
  // The environment client; nullptr without an [environment].
  rewards::EnvironmentClient* environment() const { return environment_.get(); }

  // "host:port" of each reward server, and of the environment ("" without one).
  const std::vector<std::string>& server_addresses() const { return server_addresses_; }
  const std::string& environment_address() const { return environment_address_; }

  // For summary.json: per-component reward counters and the environment client's counters.
  nlohmann::json SummaryJson() const;

 private:
  static std::string ChildName(const RewardServerConfig& server) { return "reward_" + server.name; }

  const JobConfig& config_;
  std::vector<std::string> server_addresses_;
  std::string environment_address_;
  std::unique_ptr<WeightedRewardScorer> scorer_;
  std::unique_ptr<rewards::EnvironmentClient> environment_;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_JOB_REWARDS_H_
