// Builds the built-in environments by name from JSON options, like reward_registry.h does for
// rewards. Built-ins and their options (all optional; unknown keys are errors):
//   guess_number: min (integer, 1), max (integer, 100), max_guesses (integer, 7)
#ifndef LOCKSTEP_REWARDS_BUILTIN_ENVIRONMENTS_H_
#define LOCKSTEP_REWARDS_BUILTIN_ENVIRONMENTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "rewards/environment.h"

namespace lockstep::rewards {

// NotFound (listing the known names) for an unknown name; InvalidArgument naming the bad option.
absl::StatusOr<std::unique_ptr<Environment>> CreateBuiltinEnvironment(
    absl::string_view name, const nlohmann::json& options = nlohmann::json::object());

// The built-in names, sorted.
std::vector<std::string> BuiltinEnvironmentNames();

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_BUILTIN_ENVIRONMENTS_H_
