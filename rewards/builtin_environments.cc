#include "rewards/builtin_environments.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rewards/guess_number_env.h"

namespace lockstep::rewards {
namespace {

absl::StatusOr<std::unique_ptr<Environment>> CreateGuessNumber(const nlohmann::json& json) {
  GuessNumberOptions options;
  if (!json.is_null() && !json.is_object()) {
    return absl::InvalidArgumentError("guess_number: options must be a JSON object");
  }
  const nlohmann::json object = json.is_null() ? nlohmann::json::object() : json;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& value = it.value();
    if (!value.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("guess_number: option '", key, "' must be an integer"));
    }
    if (key == "min") {
      options.min = value.get<int64_t>();
    } else if (key == "max") {
      options.max = value.get<int64_t>();
    } else if (key == "max_guesses") {
      options.max_guesses = value.get<int>();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("guess_number: unknown option '", key, "' (known: min, max, max_guesses)"));
    }
  }
  if (options.min > options.max) {
    return absl::InvalidArgumentError("guess_number: option 'min' must be <= 'max'");
  }
  if (options.max_guesses < 1) {
    return absl::InvalidArgumentError("guess_number: option 'max_guesses' must be >= 1");
  }
  return std::make_unique<GuessNumberEnvironment>(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Environment>> CreateBuiltinEnvironment(
    absl::string_view name, const nlohmann::json& options) {
  if (name == "guess_number") return CreateGuessNumber(options);
  return absl::NotFoundError(absl::StrCat("unknown environment '", name, "' (built-ins: ",
                                          absl::StrJoin(BuiltinEnvironmentNames(), ", "), ")"));
}

std::vector<std::string> BuiltinEnvironmentNames() { return {"guess_number"}; }

}  // namespace lockstep::rewards
