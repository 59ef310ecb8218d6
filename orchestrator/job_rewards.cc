#include "orchestrator/job_rewards.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "orchestrator/side_services.h"

namespace lockstep::orchestrator {
namespace {

std::vector<std::string> ResolveCommand(std::vector<std::string> command,
                                        const std::string& lockstep_binary) {
  if (!command.empty() && command[0] == "lockstep" && !lockstep_binary.empty()) {
    command[0] = lockstep_binary;
  }
  return command;
}

}  // namespace

absl::Status JobRewards::Launch(ProcessSupervisor& supervisor, const std::string& lockstep_binary,
                                const std::string& token_file, const std::string& logs_dir) {
  const std::filesystem::path logs(logs_dir);
  for (const RewardServerConfig& server : config_.rewards.servers) {
    if (server.command.empty()) continue;
    const std::string name = ChildName(server);
    if (absl::Status s =
            LaunchSideService(supervisor, name, ResolveCommand(server.command, lockstep_binary),
                              token_file, (logs / (name + ".log")).string());
        !s.ok()) {
      return s;
    }
  }
  if (!config_.environment.command.empty()) {
    if (absl::Status s = LaunchSideService(
            supervisor, "environment", ResolveCommand(config_.environment.command, lockstep_binary),
            token_file, (logs / "environment.log").string());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status JobRewards::Connect(ProcessSupervisor& supervisor, const std::string& auth_token) {
  server_addresses_.clear();
  for (const RewardServerConfig& server : config_.rewards.servers) {
    if (!server.command.empty()) {
      absl::StatusOr<std::string> address = supervisor.WaitUntilServing(ChildName(server));
      if (!address.ok()) return address.status();
      server_addresses_.push_back(*address);
    } else {
      server_addresses_.push_back(server.address);
    }
  }
  absl::StatusOr<std::unique_ptr<WeightedRewardScorer>> scorer =
      MakeRewardPipeline(config_.rewards, server_addresses_, auth_token);
  if (!scorer.ok()) return scorer.status();
  scorer_ = *std::move(scorer);

  if (!config_.environment.enabled()) return absl::OkStatus();
  environment_address_ = config_.environment.address;
  if (!config_.environment.command.empty()) {
    absl::StatusOr<std::string> address = supervisor.WaitUntilServing("environment");
    if (!address.ok()) return address.status();
    environment_address_ = *address;
  }
  rewards::EnvironmentClientOptions options;
  options.address = environment_address_;
  options.auth_token = auth_token;
  options.deadline = std::chrono::milliseconds(config_.environment.deadline_ms);
  absl::StatusOr<std::unique_ptr<rewards::EnvironmentClient>> client =
      rewards::EnvironmentClient::Create(options);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("[environment]: ", client.status().message()));
  }
  environment_ = *std::move(client);
  return absl::OkStatus();
}

nlohmann::json JobRewards::SummaryJson() const {
  nlohmann::json json;
  json["reward_components"] =
      scorer_ != nullptr ? scorer_->ComponentMetricsJson() : nlohmann::json::object();
  if (environment_ != nullptr) {
    const rewards::EnvironmentClientMetrics m = environment_->metrics();
    json["environment_client"] = {{"address", environment_address_},
                                  {"rpcs", m.rpcs},
                                  {"retries", m.retries},
                                  {"rpcs_failed", m.rpcs_failed},
                                  {"deadline_exceeded", m.deadline_exceeded},
                                  {"step_errors", m.step_errors}};
  }
  return json;
}

}  // namespace lockstep::orchestrator
