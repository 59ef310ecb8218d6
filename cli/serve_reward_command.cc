// `lockstep serve reward --builtin NAME [--options JSON]`: serves a built-in reward (math,
// exact_match, regex, length_penalty, rubric) as lockstep.v1.Reward.
// `lockstep serve environment --builtin NAME [--options JSON]`: serves a built-in multi-turn
// environment (guess_number) as lockstep.v1.Environment.
// Both add the standard health service, bind 127.0.0.1 unless told otherwise, check the job's
// token when --auth-token-file is given, and stop on SIGINT/SIGTERM.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/serve_util.h"
#include "nlohmann/json.hpp"
#include "rewards/builtin_environments.h"
#include "rewards/environment_service.h"
#include "rewards/reward_registry.h"
#include "rewards/reward_service.h"

namespace lockstep::cli {
namespace {

struct ServeBuiltinFlags {
  ServeFlags serve;
  std::string builtin;
  std::string options_json = "{}";
  size_t max_batch_size = 4096;
};

absl::StatusOr<nlohmann::json> ParseOptions(const std::string& text) {
  nlohmann::json options = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (options.is_discarded() || !options.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("--options must be a JSON object, got: ", text));
  }
  return options;
}

absl::Status RunServeReward(const ServeBuiltinFlags& flags) {
  const sigset_t stop_signals = BlockStopSignals();
  absl::StatusOr<std::string> token = LoadAuthToken(flags.serve);
  if (!token.ok()) return token.status();
  absl::StatusOr<nlohmann::json> options = ParseOptions(flags.options_json);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<rewards::Reward>> reward =
      rewards::CreateBuiltinReward(flags.builtin, *options);
  if (!reward.ok()) return reward.status();
  rewards::RewardServiceOptions service_options;
  service_options.token = *token;
  service_options.max_batch_size = flags.max_batch_size;
  rewards::RewardService service(*std::move(reward), service_options);
  std::printf("reward: %s, options %s\n", flags.builtin.c_str(), options->dump().c_str());
  return ServeUntilSignal(flags.serve, {&service}, "reward", stop_signals);
}

absl::Status RunServeEnvironment(const ServeBuiltinFlags& flags) {
  const sigset_t stop_signals = BlockStopSignals();
  absl::StatusOr<std::string> token = LoadAuthToken(flags.serve);
  if (!token.ok()) return token.status();
  absl::StatusOr<nlohmann::json> options = ParseOptions(flags.options_json);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<rewards::Environment>> environment =
      rewards::CreateBuiltinEnvironment(flags.builtin, *options);
  if (!environment.ok()) return environment.status();
  rewards::EnvironmentService service(*std::move(environment), {.token = *token});
  std::printf("environment: %s, options %s\n", flags.builtin.c_str(), options->dump().c_str());
  return ServeUntilSignal(flags.serve, {&service}, "environment", stop_signals);
}

}  // namespace

void AddServeRewardCommand(CLI::App* serve) {
  auto reward_flags = std::make_shared<ServeBuiltinFlags>();
  CLI::App* reward = serve->add_subcommand(
      "reward", "Serve a built-in reward over gRPC (lockstep.v1.Reward + health)");
  reward
      ->add_option(
          "--builtin", reward_flags->builtin,
          absl::StrCat("Built-in reward: ",
                       absl::StrJoin(rewards::RewardRegistry::WithBuiltins().names(), ", ")))
      ->required();
  reward
      ->add_option("--options", reward_flags->options_json,
                   "The reward's options as a JSON object (see docs/rewards.md)")
      ->capture_default_str();
  reward
      ->add_option("--max-batch", reward_flags->max_batch_size,
                   "Items per Score call at most (larger calls are refused)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddServeOptions(reward, &reward_flags->serve);
  reward->callback([reward_flags] { ExitOnError(RunServeReward(*reward_flags)); });

  auto environment_flags = std::make_shared<ServeBuiltinFlags>();
  CLI::App* environment = serve->add_subcommand(
      "environment", "Serve a built-in multi-turn environment (lockstep.v1.Environment + health)");
  environment
      ->add_option("--builtin", environment_flags->builtin,
                   absl::StrCat("Built-in environment: ",
                                absl::StrJoin(rewards::BuiltinEnvironmentNames(), ", ")))
      ->required();
  environment
      ->add_option("--options", environment_flags->options_json,
                   "The environment's options as a JSON object")
      ->capture_default_str();
  AddServeOptions(environment, &environment_flags->serve);
  environment->callback(
      [environment_flags] { ExitOnError(RunServeEnvironment(*environment_flags)); });
}

}  // namespace lockstep::cli
