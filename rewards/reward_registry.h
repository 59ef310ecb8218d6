// Builds rewards by name from JSON options, e.g. from a job config's
//   [reward] name = "math"  options = { tolerance = 1e-6 }
// Built-in names and their options (all optional unless marked; unknown keys are errors):
//   math:           tolerance (number, 1e-9), use_last_number (bool, true)
//   exact_match:    ignore_case (bool, false), normalize_whitespace (bool, true),
//                   strip_punctuation (bool, false)
//   regex:          pattern (string, required), full_match (bool, false), dot_all (bool, true),
//                   multiline (bool, false), ignore_case (bool, false),
//                   match_reward (number, 1), no_match_reward (number, 0)
//   length_penalty: max_length (integer, required), min_length (integer, 0),
//                   unit ("chars" | "words" | "tokens", "chars"),
//                   penalty_per_unit (number, 0.001), max_penalty (number, 1)
//   rubric:         components (array, required) of
//                   {"name": string, "reward": string, "weight": number (1),
//                    "options": object ({})}; components are built from the same registry.
//   code_tests:     language ("python3" | "cpp" | "bash", "python3"), all_or_nothing (bool,
//                   false), tests_key (string, "tests"), max_tests (integer, 64),
//                   wall_ms (4000), cpu_ms (4000), memory_mb (512), max_processes (16),
//                   max_output_bytes (1 MiB) per test run, sandbox_address (string, "": the
//                   context's sandbox_address, else the in-process sandbox; else a `lockstep
//                   serve sandbox` reached through BuiltinContext::connect_sandbox). See
//                   code_tests.h.
#ifndef LOCKSTEP_REWARDS_REWARD_REGISTRY_H_
#define LOCKSTEP_REWARDS_REWARD_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "rewards/reward.h"
#include "sandbox/executor.h"

namespace lockstep::rewards {

// Builds a reward from its JSON options (null means {}). Errors name the bad option.
using RewardFactory =
    std::function<absl::StatusOr<std::unique_ptr<Reward>>(const nlohmann::json& options)>;

// What some built-ins need from the binary that creates them, beyond their options.
struct BuiltinContext {
  // Connects to a sandbox service ("host:port") for code_tests' sandbox_address; unset in
  // binaries that link no gRPC client (then sandbox_address is an error naming the option).
  std::function<absl::StatusOr<std::shared_ptr<sandbox::Executor>>(const std::string& address)>
      connect_sandbox;
  // The sandbox service code_tests uses when its own sandbox_address option is unset (a job's
  // `[rewards] sandbox_address`); "" = the in-process sandbox. Needs connect_sandbox.
  std::string sandbox_address;
};

// Not thread-safe to Register while another thread calls Create; Create alone is const and safe.
class RewardRegistry {
 public:
  // An empty registry (only "rubric", which is always available).
  RewardRegistry() = default;

  // A registry holding the built-ins: math, exact_match, regex, length_penalty, code_tests (and
  // rubric).
  static RewardRegistry WithBuiltins(const BuiltinContext& context = {});

  // Adds a reward. Returns AlreadyExists if the name is taken (including "rubric"),
  // InvalidArgument if it is empty or the factory is null.
  absl::Status Register(std::string name, RewardFactory factory);

  // Returns a new reward, NotFound for an unknown name (the message lists the known ones), or
  // InvalidArgument naming the reward and the bad option.
  absl::StatusOr<std::unique_ptr<Reward>> Create(
      absl::string_view name, const nlohmann::json& options = nlohmann::json::object()) const;

  // Registered names, sorted, including "rubric".
  std::vector<std::string> names() const;

 private:
  absl::StatusOr<std::unique_ptr<Reward>> CreateRubric(const nlohmann::json& options) const;

  std::map<std::string, RewardFactory, std::less<>> factories_;
};

// Shorthand for RewardRegistry::WithBuiltins(context).Create(name, options).
absl::StatusOr<std::unique_ptr<Reward>> CreateBuiltinReward(
    absl::string_view name, const nlohmann::json& options = nlohmann::json::object(),
    const BuiltinContext& context = {});

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REWARD_REGISTRY_H_
