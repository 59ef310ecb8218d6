#include "data/arithmetic_task.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/dataset_iterator.h"

namespace lockstep {
namespace {

Example MakeExample(int64_t a, int64_t b, int64_t answer) {
  Example example;
  example.prompt = ArithmeticPrompt(a, b);
  example.answer = std::to_string(answer);
  example.metadata = nlohmann::json{{"a", a}, {"b", b}};
  return example;
}

Example MakeExample(int64_t a, int64_t b) { return MakeExample(a, b, a + b); }

}  // namespace

std::string ArithmeticPrompt(int64_t a, int64_t b) { return absl::StrCat(a, "+", b, "="); }

int64_t SumWithoutCarry(int64_t a, int64_t b) {
  int64_t sum = 0;
  for (int64_t place = 1; a > 0 || b > 0; place *= 10, a /= 10, b /= 10) {
    sum += ((a % 10 + b % 10) % 10) * place;
  }
  return sum;
}

absl::StatusOr<ArithmeticTask> MakeArithmeticTask(const ArithmeticTaskOptions& options) {
  if (options.max_operand < 1 || options.max_operand > 9999) {
    return absl::InvalidArgumentError("arithmetic task: max_operand must be in [1, 9999]");
  }
  if (!(options.eval_fraction > 0.0 && options.eval_fraction < 1.0)) {
    return absl::InvalidArgumentError("arithmetic task: eval_fraction must be in (0, 1)");
  }
  if (options.eval_size < 1) {
    return absl::InvalidArgumentError("arithmetic task: eval_size must be >= 1");
  }
  if (!(options.teacher_carry_error >= 0.0 && options.teacher_carry_error <= 1.0)) {
    return absl::InvalidArgumentError("arithmetic task: teacher_carry_error must be in [0, 1]");
  }
  if (options.teacher_draws < 1 || options.teacher_draws > 1000) {
    return absl::InvalidArgumentError("arithmetic task: teacher_draws must be in [1, 1000]");
  }
  const int64_t side = options.max_operand + 1;
  const int64_t num_pairs = side * side;
  // A seeded permutation of all pairs; the first eval_fraction of it is held out.
  std::vector<int64_t> order = EpochOrder(options.seed ^ 0xA417'8ECAull, 0, num_pairs);
  const int64_t num_held_out = std::clamp<int64_t>(
      static_cast<int64_t>(options.eval_fraction * num_pairs), 1, num_pairs - 1);
  // Of the teacher_draws SFT answers of a carry problem, this many drop the carry.
  const int64_t num_wrong_draws = static_cast<int64_t>(
      std::llround(options.teacher_carry_error * static_cast<double>(options.teacher_draws)));
  std::vector<Example> train, eval, sft;
  for (int64_t i = num_held_out; i < num_pairs; ++i) {
    const int64_t a = order[i] / side, b = order[i] % side;
    train.push_back(MakeExample(a, b));
    const bool carries = SumWithoutCarry(a, b) != a + b;
    for (int64_t draw = 0; draw < options.teacher_draws; ++draw) {
      const bool wrong = carries && draw < num_wrong_draws;
      sft.push_back(MakeExample(a, b, wrong ? SumWithoutCarry(a, b) : a + b));
    }
  }
  for (int64_t i = 0; i < options.eval_size; ++i) {
    const int64_t pair = order[i % num_held_out];
    eval.push_back(MakeExample(pair / side, pair % side));
  }
  return ArithmeticTask{Dataset(std::move(train), "arithmetic(train)"),
                        Dataset(std::move(eval), "arithmetic(eval)"),
                        Dataset(std::move(sft), "arithmetic(sft)")};
}

}  // namespace lockstep
