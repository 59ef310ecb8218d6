#include "orchestrator/reward_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rewards/local_reward_scorer.h"
#include "rewards/reward_client.h"
#include "rewards/reward_registry.h"
#include "sandbox/sandbox_client.h"

namespace lockstep::orchestrator {
namespace {

// code_tests in a job reaches a sandbox service (its own sandbox_address option, else
// [rewards] sandbox_address) with the job's token, like every other address of the job.
rewards::BuiltinContext SandboxContext(const RewardsSection& rewards,
                                       const std::string& auth_token) {
  rewards::BuiltinContext context;
  context.sandbox_address = rewards.sandbox_address;
  context.connect_sandbox = [auth_token](const std::string& address) {
    return sandbox::ConnectSandbox(address, auth_token);
  };
  return context;
}

}  // namespace

// One ScoreAsync in flight: each component's outcomes, filled in as they arrive.
struct WeightedRewardScorer::PendingItems {
  std::mutex mu;
  size_t num_items = 0;
  size_t components_left = 0;
  std::vector<std::vector<rewards::ItemOutcome>> by_component;
  rewards::ScoreDoneCallback done;
};

rewards::ItemOutcome CombineOutcomes(const std::vector<RewardComponent>& components,
                                     const std::vector<const rewards::ItemOutcome*>& outcomes) {
  rewards::ItemOutcome combined;
  std::vector<std::string> errors;
  double reward = 0;
  for (size_t c = 0; c < components.size(); ++c) {
    const rewards::ItemOutcome& outcome = *outcomes[c];
    if (!outcome.ok) {
      errors.push_back(absl::StrCat(components[c].name, ": ", outcome.error));
      continue;
    }
    reward += components[c].weight * outcome.reward;
    combined.sub_scores[components[c].name] = outcome.reward;
    for (const auto& [key, value] : outcome.sub_scores) {
      combined.sub_scores[absl::StrCat(components[c].name, "/", key)] = value;
    }
  }
  if (components.empty()) errors.push_back("no reward configured");
  if (!errors.empty()) {
    combined = rewards::ItemOutcome();
    combined.error = absl::StrJoin(errors, "; ");
    return combined;
  }
  combined.ok = true;
  combined.reward = reward;
  return combined;
}

WeightedRewardScorer::WeightedRewardScorer(std::vector<RewardComponent> components)
    : components_(std::move(components)), verdict_counts_(components_.size()) {}

std::string WeightedRewardScorer::name() const {
  std::vector<std::string> parts;
  for (const RewardComponent& c : components_) {
    parts.push_back(absl::StrCat(c.weight, " x ", c.scorer->name()));
  }
  return parts.empty() ? "no reward" : absl::StrJoin(parts, " + ");
}

void WeightedRewardScorer::ScoreAsync(std::vector<rewards::RewardInput> items,
                                      rewards::ScoreDoneCallback done) {
  const auto num_items = static_cast<int64_t>(items.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.items_sent += num_items;
    metrics_.items_in_flight += num_items;
  }
  auto pending = std::make_shared<PendingItems>();
  pending->num_items = items.size();
  pending->components_left = components_.size();
  pending->by_component.resize(components_.size());
  pending->done = std::move(done);
  if (components_.empty()) {
    Finish(*pending);
    return;
  }
  for (size_t c = 0; c < components_.size(); ++c) {
    std::vector<rewards::RewardInput> copy = c + 1 == components_.size() ? std::move(items) : items;
    components_[c].scorer->ScoreAsync(
        std::move(copy), [this, pending, c](std::vector<rewards::ItemOutcome> outcomes) {
          bool last = false;
          {
            std::lock_guard<std::mutex> lock(pending->mu);
            pending->by_component[c] = std::move(outcomes);
            last = --pending->components_left == 0;
          }
          if (last) Finish(*pending);
        });
  }
}

void WeightedRewardScorer::Finish(PendingItems& pending) {
  std::vector<rewards::ItemOutcome> combined(pending.num_items);
  std::vector<const rewards::ItemOutcome*> row(components_.size());
  int64_t num_scored = 0;
  for (size_t i = 0; i < pending.num_items; ++i) {
    for (size_t c = 0; c < components_.size(); ++c) row[c] = &pending.by_component[c][i];
    combined[i] = CombineOutcomes(components_, row);
    num_scored += combined[i].ok ? 1 : 0;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto n = static_cast<int64_t>(pending.num_items);
    metrics_.items_scored += num_scored;
    metrics_.items_failed += n - num_scored;
    metrics_.items_in_flight -= n;
    for (size_t c = 0; c < components_.size(); ++c) {
      for (const rewards::ItemOutcome& outcome : pending.by_component[c]) {
        if (!outcome.ok) continue;
        for (const auto& [key, value] : outcome.sub_scores) {
          if (absl::StartsWith(key, "verdict_")) verdict_counts_[c][key] += value;
        }
      }
    }
  }
  pending.done(std::move(combined));
}

rewards::ClientMetrics WeightedRewardScorer::metrics() const {
  rewards::ClientMetrics total;
  {
    std::lock_guard<std::mutex> lock(mu_);
    total = metrics_;
  }
  for (const RewardComponent& c : components_) {
    const rewards::ClientMetrics m = c.scorer->metrics();
    total.rpcs += m.rpcs;
    total.rpcs_failed += m.rpcs_failed;
    total.retries += m.retries;
    total.deadline_exceeded += m.deadline_exceeded;
    total.max_concurrent_rpcs = std::max(total.max_concurrent_rpcs, m.max_concurrent_rpcs);
  }
  return total;
}

nlohmann::json WeightedRewardScorer::ComponentMetricsJson() const {
  nlohmann::json json = nlohmann::json::object();
  for (const RewardComponent& c : components_) {
    const rewards::ClientMetrics m = c.scorer->metrics();
    json[c.name] = {{"scorer", c.scorer->name()},
                    {"weight", c.weight},
                    {"items_sent", m.items_sent},
                    {"items_scored", m.items_scored},
                    {"items_failed", m.items_failed},
                    {"items_in_flight", m.items_in_flight},
                    {"rpcs", m.rpcs},
                    {"rpcs_failed", m.rpcs_failed},
                    {"retries", m.retries},
                    {"deadline_exceeded", m.deadline_exceeded}};
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t c = 0; c < components_.size(); ++c) {
    if (verdict_counts_[c].empty()) continue;
    double executions = 0;
    nlohmann::json verdicts = nlohmann::json::object();
    for (const auto& [key, count] : verdict_counts_[c]) {
      executions += count;
      verdicts[key.substr(std::string("verdict_").size())] = static_cast<int64_t>(count);
    }
    json[components_[c].name]["sandbox_executions"] = static_cast<int64_t>(executions);
    json[components_[c].name]["sandbox_verdicts"] = std::move(verdicts);
  }
  return json;
}

absl::StatusOr<std::unique_ptr<WeightedRewardScorer>> MakeRewardPipeline(
    const RewardsSection& rewards, const std::vector<std::string>& server_addresses,
    const std::string& auth_token) {
  if (server_addresses.size() != rewards.servers.size()) {
    return absl::InternalError(absl::StrCat("reward pipeline: ", server_addresses.size(),
                                            " addresses for ", rewards.servers.size(),
                                            " [[rewards.servers]]"));
  }
  std::vector<RewardComponent> components;
  if (!rewards.builtin.empty()) {
    absl::StatusOr<std::unique_ptr<rewards::Reward>> reward =
        rewards::RewardRegistry::WithBuiltins(SandboxContext(rewards, auth_token))
            .Create(rewards.builtin, rewards.options);
    if (!reward.ok()) return reward.status();
    components.push_back({absl::StrCat("builtin:", rewards.builtin), rewards.weight,
                          std::make_unique<rewards::LocalRewardScorer>(*std::move(reward), 1)});
  }
  for (size_t i = 0; i < rewards.servers.size(); ++i) {
    const RewardServerConfig& server = rewards.servers[i];
    rewards::ClientOptions options;
    options.address = server_addresses[i];
    options.auth_token = auth_token;
    options.deadline = std::chrono::milliseconds(server.deadline_ms);
    options.max_attempts = static_cast<int>(server.max_attempts);
    options.max_concurrency = static_cast<int>(server.max_concurrency);
    absl::StatusOr<std::unique_ptr<rewards::RewardClient>> client =
        rewards::RewardClient::Create(options);
    if (!client.ok()) {
      return absl::Status(client.status().code(), absl::StrCat("[[rewards.servers]] ", server.name,
                                                               ": ", client.status().message()));
    }
    components.push_back({server.name, server.weight, *std::move(client)});
  }
  return std::make_unique<WeightedRewardScorer>(std::move(components));
}

}  // namespace lockstep::orchestrator
