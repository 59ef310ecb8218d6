#include "data/arithmetic_code_task.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

int64_t Operand(const Example& example, const char* name) {
  return example.metadata.at(name).get<int64_t>();
}

// `example` of the arithmetic task as a code example whose reference program is `program`.
Example ToCode(const Example& example, std::string program) {
  const int64_t a = Operand(example, "a"), b = Operand(example, "b");
  Example code;
  code.prompt = ArithmeticCodePrompt(a, b);
  code.answer = std::move(program);
  code.metadata = nlohmann::json{
      {"a", a},
      {"b", b},
      {"tests", nlohmann::json::array({{{"input", ""}, {"output", std::to_string(a + b)}}})}};
  return code;
}

Dataset ToCode(const Dataset& dataset, const std::string& source) {
  std::vector<Example> examples;
  for (const Example& example : dataset.examples()) {
    examples.push_back(ToCode(example, absl::StrCat("print(", *example.answer, ")")));
  }
  return Dataset(std::move(examples), source);
}

}  // namespace

std::string ArithmeticCodePrompt(int64_t a, int64_t b) {
  return absl::StrCat("print ", a, "+", b, " in python:");
}

absl::StatusOr<ArithmeticTask> MakeArithmeticCodeTask(const ArithmeticTaskOptions& options) {
  absl::StatusOr<ArithmeticTask> task = MakeArithmeticTask(options);
  if (!task.ok()) return task.status();
  // The teacher's right answers are the program that computes; its wrong ones (the arithmetic
  // teacher's carry-dropped sums) stay literals.
  std::vector<Example> sft;
  for (const Example& example : task->sft.examples()) {
    const int64_t a = Operand(example, "a"), b = Operand(example, "b");
    const bool right = *example.answer == std::to_string(a + b);
    sft.push_back(ToCode(example, right ? absl::StrCat("print(", a, "+", b, ")")
                                        : absl::StrCat("print(", *example.answer, ")")));
  }
  return ArithmeticTask{ToCode(task->train, "arithmetic_code(train)"),
                        ToCode(task->eval, "arithmetic_code(eval)"),
                        Dataset(std::move(sft), "arithmetic_code(sft)")};
}

}  // namespace lockstep
