#include "rewards/code_tests.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace lockstep::rewards {
namespace {

absl::Status BadTests(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("code_tests: tests ", why));
}

// A JSON string, or a number/bool written as text (some datasets store outputs as numbers).
bool AsText(const nlohmann::json& value, std::string* out) {
  if (value.is_string()) {
    *out = value.get<std::string>();
    return true;
  }
  if (value.is_number() || value.is_boolean()) {
    *out = value.dump();
    return true;
  }
  return false;
}

std::vector<absl::string_view> FenceTags(absl::string_view language) {
  if (language == "python3") return {"python", "py", "python3"};
  if (language == "cpp") return {"cpp", "c++", "cc", "cxx"};
  if (language == "bash") return {"bash", "sh", "shell"};
  return {language};
}

}  // namespace

absl::StatusOr<std::vector<CodeTest>> ParseCodeTests(absl::string_view json_text) {
  nlohmann::json json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return BadTests("are not valid JSON");
  std::vector<CodeTest> tests;
  if (json.is_array()) {
    for (size_t i = 0; i < json.size(); ++i) {
      const nlohmann::json& entry = json[i];
      CodeTest test;
      if (!entry.is_object() || !entry.contains("input") || !entry.contains("output") ||
          !AsText(entry["input"], &test.input) || !AsText(entry["output"], &test.expected_output)) {
        return BadTests(absl::StrCat("[", i, "] must be {\"input\": string, \"output\": string}"));
      }
      tests.push_back(std::move(test));
    }
  } else if (json.is_object() && json.contains("inputs")) {
    const nlohmann::json& inputs = json["inputs"];
    const nlohmann::json& outputs = json.value("outputs", nlohmann::json());
    if (!inputs.is_array() || !outputs.is_array() || inputs.size() != outputs.size()) {
      return BadTests("\"inputs\" and \"outputs\" must be arrays of the same length");
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      CodeTest test;
      if (!AsText(inputs[i], &test.input) || !AsText(outputs[i], &test.expected_output)) {
        return BadTests(absl::StrCat("inputs/outputs[", i, "] must be strings"));
      }
      tests.push_back(std::move(test));
    }
  } else if (json.is_object() && json.contains("asserts")) {
    const nlohmann::json& asserts = json["asserts"];
    if (!asserts.is_array()) return BadTests("\"asserts\" must be an array of strings");
    const std::string setup = json.value("setup", "");
    for (size_t i = 0; i < asserts.size(); ++i) {
      if (!asserts[i].is_string()) return BadTests(absl::StrCat("asserts[", i, "] must be a string"));
      CodeTest test;
      test.compares_output = false;
      test.appended_code = absl::StrCat(setup, setup.empty() ? "" : "\n", asserts[i].get<std::string>());
      tests.push_back(std::move(test));
    }
  } else if (json.is_object() && json.contains("test") && json.contains("entry_point")) {
    if (!json["test"].is_string() || !json["entry_point"].is_string()) {
      return BadTests("\"test\" and \"entry_point\" must be strings");
    }
    CodeTest test;
    test.compares_output = false;
    test.appended_code = absl::StrCat(json["test"].get<std::string>(), "\ncheck(",
                                      json["entry_point"].get<std::string>(), ")");
    tests.push_back(std::move(test));
  } else {
    return BadTests(
        "must be [{\"input\", \"output\"}...], {\"inputs\", \"outputs\"}, {\"asserts\"} or "
        "{\"test\", \"entry_point\"}");
  }
  if (tests.empty()) return BadTests("are empty");
  return tests;
}

std::string ExtractProgram(absl::string_view completion, absl::string_view language) {
  const std::vector<absl::string_view> tags = FenceTags(language);
  std::string program;
  bool found = false;
  size_t position = 0;
  while (true) {
    const size_t open = completion.find("```", position);
    if (open == absl::string_view::npos) break;
    const size_t line_end = completion.find('\n', open);
    if (line_end == absl::string_view::npos) break;
    const size_t close = completion.find("```", line_end + 1);
    if (close == absl::string_view::npos) break;
    const std::string tag =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(completion.substr(open + 3, line_end - open - 3)));
    if (std::find(tags.begin(), tags.end(), tag) != tags.end()) {
      program = std::string(completion.substr(line_end + 1, close - line_end - 1));
      found = true;
    }
    position = close + 3;
  }
  return found ? program : std::string(completion);
}

bool OutputsMatch(absl::string_view actual, absl::string_view expected) {
  const std::vector<absl::string_view> a =
      absl::StrSplit(actual, absl::ByAnyChar(" \t\r\n\v\f"), absl::SkipEmpty());
  const std::vector<absl::string_view> b =
      absl::StrSplit(expected, absl::ByAnyChar(" \t\r\n\v\f"), absl::SkipEmpty());
  return a == b;
}

absl::StatusOr<std::unique_ptr<CodeTestsReward>> CodeTestsReward::Create(
    CodeTestsOptions options, std::shared_ptr<sandbox::Executor> executor) {
  const std::vector<std::string>& languages = sandbox::KnownLanguages();
  if (std::find(languages.begin(), languages.end(), options.language) == languages.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward \"code_tests\": option \"language\" must be python3, cpp or bash, got \"",
                     options.language, "\""));
  }
  if (options.tests_key.empty()) {
    return absl::InvalidArgumentError("reward \"code_tests\": option \"tests_key\" is empty");
  }
  if (options.max_tests <= 0) {
    return absl::InvalidArgumentError("reward \"code_tests\": option \"max_tests\" must be positive");
  }
  sandbox::ExecRequest probe;
  probe.language = options.language;
  probe.source = "x";
  probe.limits = options.limits;
  if (absl::Status status = sandbox::ValidateRequest(probe); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward \"code_tests\": ", status.message()));
  }
  if (executor == nullptr) {
    return absl::InvalidArgumentError("reward \"code_tests\": no sandbox executor");
  }
  return std::unique_ptr<CodeTestsReward>(
      new CodeTestsReward(std::move(options), std::move(executor)));
}

absl::StatusOr<RewardResult> CodeTestsReward::Score(const RewardInput& input) const {
  auto tests_text = input.metadata.find(options_.tests_key);
  if (tests_text == input.metadata.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("code_tests: the item has no metadata \"", options_.tests_key, "\""));
  }
  absl::StatusOr<std::vector<CodeTest>> tests = ParseCodeTests(tests_text->second);
  if (!tests.ok()) return tests.status();
  if (static_cast<int64_t>(tests->size()) > options_.max_tests) {
    return absl::InvalidArgumentError(absl::StrCat("code_tests: ", tests->size(),
                                                   " tests, more than max_tests ",
                                                   options_.max_tests));
  }
  const std::string program = ExtractProgram(input.completion, options_.language);

  RewardResult result;
  std::map<std::string, double> verdicts;
  for (sandbox::Verdict verdict : sandbox::AllVerdicts()) {
    verdicts[absl::StrCat("verdict_", sandbox::VerdictName(verdict))] = 0;
  }
  int passed = 0;
  for (size_t i = 0; i < tests->size(); ++i) {
    const CodeTest& test = (*tests)[i];
    sandbox::ExecRequest request;
    request.language = options_.language;
    request.source = test.compares_output ? program : absl::StrCat(program, "\n", test.appended_code, "\n");
    request.stdin_data = test.input;
    request.limits = options_.limits;
    if (request.source.empty()) request.source = "\n";  // an empty completion is a wrong program
    absl::StatusOr<sandbox::ExecResult> run = executor_->Execute(request);
    if (!run.ok()) {
      return absl::Status(run.status().code(), absl::StrCat("code_tests: test ", i,
                                                            ": the sandbox failed: ",
                                                            run.status().message()));
    }
    if (run->verdict == sandbox::Verdict::kSandboxError) {
      return absl::UnavailableError(
          absl::StrCat("code_tests: test ", i, ": sandbox_error: ", run->error));
    }
    verdicts[absl::StrCat("verdict_", sandbox::VerdictName(run->verdict))] += 1;
    const bool ok = run->verdict == sandbox::Verdict::kOk &&
                    (!test.compares_output || OutputsMatch(run->stdout_data, test.expected_output));
    passed += ok ? 1 : 0;
    if (static_cast<int64_t>(i) < options_.max_reported_tests) {
      result.sub_scores[absl::StrCat("test_", i)] = ok ? 1.0 : 0.0;
    }
    // A compile error fails every test alike: no need to compile it again.
    if (run->verdict == sandbox::Verdict::kCompileError) {
      verdicts["verdict_compile_error"] += static_cast<double>(tests->size() - i - 1);
      for (size_t j = i + 1; j < tests->size(); ++j) {
        if (static_cast<int64_t>(j) < options_.max_reported_tests) {
          result.sub_scores[absl::StrCat("test_", j)] = 0.0;
        }
      }
      break;
    }
  }
  const double fraction = static_cast<double>(passed) / static_cast<double>(tests->size());
  result.reward = options_.all_or_nothing ? (passed == static_cast<int>(tests->size()) ? 1.0 : 0.0)
                                          : fraction;
  result.sub_scores["passed"] = fraction;
  result.sub_scores["tests"] = static_cast<double>(tests->size());
  for (const auto& [name, count] : verdicts) result.sub_scores[name] = count;
  return result;
}

}  // namespace lockstep::rewards
