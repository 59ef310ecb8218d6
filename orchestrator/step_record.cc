#include "orchestrator/step_record.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace lockstep::orchestrator {

EpisodeCounts& EpisodeCounts::operator+=(const EpisodeCounts& other) {
  episodes += other.episodes;
  failed += other.failed;
  truncated += other.truncated;
  turns += other.turns;
  return *this;
}

void to_json(nlohmann::json& json, const AgeCounts& ages) {
  json = nlohmann::json::object();
  for (const auto& [age, count] : ages.counts) json[std::to_string(age)] = count;
}

void from_json(const nlohmann::json& json, AgeCounts& ages) {
  ages.counts.clear();
  if (!json.is_object()) return;
  for (const auto& [text, count] : json.items()) {
    char* end = nullptr;
    const long long age = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || !count.is_number()) continue;
    ages.counts[age] += count.get<int64_t>();
  }
}

void RlTotals::Add(const StepRecord& record) {
  ++steps;
  if (record.parity) {
    parity_tokens_compared += record.parity->tokens_compared;
    parity_tokens_mismatched += record.parity->tokens_mismatched;
    parity_max_abs_diff = std::max(parity_max_abs_diff, record.parity->max_abs_diff);
  }
  reward_items_sent += record.reward_items_sent.value_or(0);
  reward_items_scored += record.reward_items_scored.value_or(0);
  reward_items_failed += record.reward_items_failed.value_or(0);
  samples_trained += record.rollouts_trained.value_or(0);
  model_tokens_trained += record.rollout_model_tokens.value_or(0);
  environment_tokens_trained += record.rollout_environment_tokens.value_or(0);
  if (record.moe) {
    routing_tokens_compared = routing_tokens_compared.value_or(0) +
                              record.moe->routing_tokens_compared;
    routing_tokens_disagreeing = routing_tokens_disagreeing.value_or(0) +
                                 record.moe->routing_tokens_disagreeing;
  }
  if (record.episodes) episodes += *record.episodes;
  if (record.staleness) {
    for (const auto& [age, count] : record.staleness->counts) ages[age] += count;
  }
}

}  // namespace lockstep::orchestrator
