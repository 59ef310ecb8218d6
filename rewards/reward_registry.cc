#include "rewards/reward_registry.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rewards/code_tests.h"
#include "rewards/exact_match.h"
#include "rewards/length_penalty.h"
#include "rewards/math_answer.h"
#include "rewards/regex_format.h"
#include "rewards/rubric.h"
#include "sandbox/sandbox.h"

namespace lockstep::rewards {
namespace {

constexpr absl::string_view kRubric = "rubric";

// Reads typed options out of a JSON object, remembering the first error and which keys were
// read, so that Finish() can reject unknown keys:
//   OptionReader reader("math", options);
//   reader.Number("tolerance", &opts.tolerance);
//   if (absl::Status s = reader.Finish(); !s.ok()) return s;
class OptionReader {
 public:
  OptionReader(absl::string_view reward, const nlohmann::json& options)
      : reward_(reward), options_(options) {
    if (!options_.is_null() && !options_.is_object()) {
      Fail(absl::StrCat("options must be a JSON object, got ", options_.type_name()));
    }
  }

  void Number(const char* key, double* out, bool required = false) {
    Read(key, required, "a number", [&](const nlohmann::json& v) {
      if (!v.is_number()) return false;
      *out = v.get<double>();
      return true;
    });
  }
  void Integer(const char* key, int64_t* out, bool required = false) {
    Read(key, required, "an integer", [&](const nlohmann::json& v) {
      if (!v.is_number_integer()) return false;
      *out = v.get<int64_t>();
      return true;
    });
  }
  void Bool(const char* key, bool* out) {
    Read(key, false, "true or false", [&](const nlohmann::json& v) {
      if (!v.is_boolean()) return false;
      *out = v.get<bool>();
      return true;
    });
  }
  void String(const char* key, std::string* out, bool required = false) {
    Read(key, required, "a string", [&](const nlohmann::json& v) {
      if (!v.is_string()) return false;
      *out = v.get<std::string>();
      return true;
    });
  }
  // For values that need more than a type check (enums, arrays). Returns nullptr if absent.
  const nlohmann::json* Raw(const char* key, bool required = false) { return Find(key, required); }

  // Records an error about one option (first error wins).
  void BadValue(const char* key, absl::string_view why) {
    Fail(absl::StrCat("option \"", key, "\" ", why));
  }

  // Returns the first error, else InvalidArgument for a key that was never read, else OK.
  absl::Status Finish() const {
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    if (options_.is_object()) {
      for (const auto& [key, value] : options_.items()) {
        if (read_.count(key) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("reward \"", reward_, "\": unknown option \"", key, "\""));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  const nlohmann::json* Find(const char* key, bool required) {
    read_.insert(key);
    if (options_.is_object()) {
      auto it = options_.find(key);
      if (it != options_.end()) return &*it;
    }
    if (required) Fail(absl::StrCat("missing required option \"", key, "\""));
    return nullptr;
  }

  template <typename Parse>
  void Read(const char* key, bool required, absl::string_view expected, Parse parse) {
    const nlohmann::json* value = Find(key, required);
    if (value != nullptr && !parse(*value)) {
      BadValue(key, absl::StrCat("must be ", expected, ", got ", value->dump()));
    }
  }

  void Fail(absl::string_view message) {
    if (error_.empty()) error_ = absl::StrCat("reward \"", reward_, "\": ", message);
  }

  std::string reward_;
  const nlohmann::json& options_;
  std::set<std::string> read_;
  std::string error_;
};

// Upcasts a built-in's Create result. Its validation errors already start with its name.
template <typename T>
absl::StatusOr<std::unique_ptr<Reward>> Upcast(absl::StatusOr<std::unique_ptr<T>> reward) {
  if (!reward.ok()) return reward.status();
  return std::unique_ptr<Reward>(std::move(*reward));
}

absl::StatusOr<std::unique_ptr<Reward>> CreateMath(const nlohmann::json& json) {
  MathAnswerOptions options;
  OptionReader reader("math", json);
  reader.Number("tolerance", &options.tolerance);
  reader.Bool("use_last_number", &options.use_last_number);
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  return Upcast(MathAnswerReward::Create(options));
}

absl::StatusOr<std::unique_ptr<Reward>> CreateExactMatch(const nlohmann::json& json) {
  ExactMatchOptions options;
  OptionReader reader("exact_match", json);
  reader.Bool("ignore_case", &options.ignore_case);
  reader.Bool("normalize_whitespace", &options.normalize_whitespace);
  reader.Bool("strip_punctuation", &options.strip_punctuation);
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  return std::unique_ptr<Reward>(std::make_unique<ExactMatchReward>(options));
}

absl::StatusOr<std::unique_ptr<Reward>> CreateRegex(const nlohmann::json& json) {
  RegexFormatOptions options;
  OptionReader reader("regex", json);
  reader.String("pattern", &options.pattern, /*required=*/true);
  reader.Bool("full_match", &options.full_match);
  reader.Bool("dot_all", &options.dot_all);
  reader.Bool("multiline", &options.multiline);
  reader.Bool("ignore_case", &options.ignore_case);
  reader.Number("match_reward", &options.match_reward);
  reader.Number("no_match_reward", &options.no_match_reward);
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  return Upcast(RegexFormatReward::Create(std::move(options)));
}

absl::StatusOr<std::unique_ptr<Reward>> CreateLengthPenalty(const nlohmann::json& json) {
  LengthPenaltyOptions options;
  OptionReader reader("length_penalty", json);
  reader.Integer("max_length", &options.max_length, /*required=*/true);
  reader.Integer("min_length", &options.min_length);
  reader.Number("penalty_per_unit", &options.penalty_per_unit);
  reader.Number("max_penalty", &options.max_penalty);
  if (const nlohmann::json* unit = reader.Raw("unit")) {
    if (*unit == "chars") {
      options.unit = LengthUnit::kCharacters;
    } else if (*unit == "words") {
      options.unit = LengthUnit::kWords;
    } else if (*unit == "tokens") {
      options.unit = LengthUnit::kTokens;
    } else {
      reader.BadValue(
          "unit", absl::StrCat("must be \"chars\", \"words\" or \"tokens\", got ", unit->dump()));
    }
  }
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  return Upcast(LengthPenaltyReward::Create(options));
}

absl::StatusOr<std::unique_ptr<Reward>> CreateCodeTests(const nlohmann::json& json,
                                                        const BuiltinContext& context) {
  CodeTestsOptions options;
  std::string sandbox_address;
  OptionReader reader("code_tests", json);
  reader.String("language", &options.language);
  reader.Bool("all_or_nothing", &options.all_or_nothing);
  reader.String("tests_key", &options.tests_key);
  reader.Integer("max_tests", &options.max_tests);
  reader.Integer("wall_ms", &options.limits.wall_ms);
  reader.Integer("cpu_ms", &options.limits.cpu_ms);
  reader.Integer("memory_mb", &options.limits.memory_mb);
  reader.Integer("max_processes", &options.limits.max_processes);
  reader.Integer("max_output_bytes", &options.limits.max_output_bytes);
  reader.String("sandbox_address", &sandbox_address);
  if (sandbox_address.empty()) sandbox_address = context.sandbox_address;
  if (!sandbox_address.empty() && !context.connect_sandbox) {
    reader.BadValue("sandbox_address", "needs a binary that links the sandbox client (lockstep)");
  }
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  std::shared_ptr<sandbox::Executor> executor;
  if (!sandbox_address.empty()) {
    absl::StatusOr<std::shared_ptr<sandbox::Executor>> remote =
        context.connect_sandbox(sandbox_address);
    if (!remote.ok()) {
      return absl::Status(remote.status().code(),
                          absl::StrCat("reward \"code_tests\": sandbox_address \"", sandbox_address,
                                       "\": ", remote.status().message()));
    }
    executor = *std::move(remote);
  } else {
    absl::StatusOr<sandbox::Sandbox*> local = sandbox::DefaultSandbox();
    if (!local.ok()) {
      return absl::Status(local.status().code(),
                          absl::StrCat("reward \"code_tests\": ", local.status().message()));
    }
    // The process-wide sandbox lives until exit; the reward only borrows it.
    executor = std::shared_ptr<sandbox::Executor>(*local, [](sandbox::Executor*) {});
  }
  return Upcast(CodeTestsReward::Create(std::move(options), std::move(executor)));
}

}  // namespace

RewardRegistry RewardRegistry::WithBuiltins(const BuiltinContext& context) {
  RewardRegistry registry;
  registry.factories_.emplace("math", CreateMath);
  registry.factories_.emplace("exact_match", CreateExactMatch);
  registry.factories_.emplace("regex", CreateRegex);
  registry.factories_.emplace("length_penalty", CreateLengthPenalty);
  registry.factories_.emplace("code_tests", [context](const nlohmann::json& options) {
    return CreateCodeTests(options, context);
  });
  return registry;
}

absl::Status RewardRegistry::Register(std::string name, RewardFactory factory) {
  if (name.empty() || factory == nullptr) {
    return absl::InvalidArgumentError("a reward needs a non-empty name and a factory");
  }
  if (name == kRubric || factories_.count(name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("reward \"", name, "\" is already registered"));
  }
  factories_.emplace(std::move(name), std::move(factory));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Reward>> RewardRegistry::Create(
    absl::string_view name, const nlohmann::json& options) const {
  if (name == kRubric) return CreateRubric(options);
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown reward \"", name, "\" (known: ", absl::StrJoin(names(), ", "), ")"));
  }
  return it->second(options);
}

std::vector<std::string> RewardRegistry::names() const {
  std::set<std::string> names = {std::string(kRubric)};
  for (const auto& [name, factory] : factories_) names.insert(name);
  return {names.begin(), names.end()};
}

absl::StatusOr<std::unique_ptr<Reward>> RewardRegistry::CreateRubric(
    const nlohmann::json& json) const {
  OptionReader reader(kRubric, json);
  const nlohmann::json* components_json = reader.Raw("components", /*required=*/true);
  if (components_json != nullptr && (!components_json->is_array() || components_json->empty())) {
    reader.BadValue("components", "must be a non-empty array");
  }
  if (absl::Status status = reader.Finish(); !status.ok()) return status;

  std::vector<RubricComponent> components;
  for (size_t i = 0; i < components_json->size(); ++i) {
    const nlohmann::json& entry = (*components_json)[i];
    const std::string where = absl::StrCat("rubric component ", i);
    RubricComponent component;
    std::string reward_name;
    OptionReader entry_reader(where, entry);
    entry_reader.String("name", &component.name, /*required=*/true);
    entry_reader.String("reward", &reward_name, /*required=*/true);
    entry_reader.Number("weight", &component.weight);
    const nlohmann::json* options = entry_reader.Raw("options");
    if (absl::Status status = entry_reader.Finish(); !status.ok()) return status;
    absl::StatusOr<std::unique_ptr<Reward>> reward =
        Create(reward_name, options != nullptr ? *options : nlohmann::json::object());
    if (!reward.ok()) {
      return absl::Status(
          reward.status().code(),
          absl::StrCat("rubric component \"", component.name, "\": ", reward.status().message()));
    }
    component.reward = std::move(*reward);
    components.push_back(std::move(component));
  }
  return Upcast(Rubric::Create(std::move(components)));
}

absl::StatusOr<std::unique_ptr<Reward>> CreateBuiltinReward(absl::string_view name,
                                                            const nlohmann::json& options,
                                                            const BuiltinContext& context) {
  return RewardRegistry::WithBuiltins(context).Create(name, options);
}

}  // namespace lockstep::rewards
