#include "rewards/rubric.h"

#include <cmath>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::rewards {

absl::StatusOr<std::unique_ptr<Rubric>> Rubric::Create(std::vector<RubricComponent> components) {
  if (components.empty()) return absl::InvalidArgumentError("rubric: no components");
  std::set<std::string> names;
  for (const RubricComponent& component : components) {
    if (component.name.empty() || component.name.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("rubric: component name \"", component.name,
                                                     "\" must be non-empty and without '/'"));
    }
    if (!names.insert(component.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("rubric: component name \"", component.name, "\" is repeated"));
    }
    if (!std::isfinite(component.weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rubric: component \"", component.name, "\" has a non-finite weight"));
    }
    if (component.reward == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("rubric: component \"", component.name, "\" has no reward"));
    }
  }
  return std::unique_ptr<Rubric>(new Rubric(std::move(components)));
}

absl::StatusOr<RewardResult> Rubric::Score(const RewardInput& input) const {
  RewardResult result;
  for (const RubricComponent& component : components_) {
    absl::StatusOr<RewardResult> part = component.reward->Score(input);
    if (!part.ok()) {
      return absl::Status(part.status().code(), absl::StrCat("rubric component \"", component.name,
                                                             "\": ", part.status().message()));
    }
    result.reward += component.weight * part->reward;
    result.sub_scores[component.name] = part->reward;
    for (const auto& [sub_name, value] : part->sub_scores) {
      result.sub_scores[absl::StrCat(component.name, "/", sub_name)] = value;
    }
  }
  return result;
}

}  // namespace lockstep::rewards
