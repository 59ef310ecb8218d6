#include "data/arithmetic_task.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/dataset_iterator.h"

namespace lockstep {
namespace {

Example MakeExample(int64_t a, int64_t b) {
  Example example;
  example.prompt = ArithmeticPrompt(a, b);
  example.answer = std::to_string(a + b);
  example.metadata = nlohmann::json{{"a", a}, {"b", b}};
  return example;
}

}  // namespace

std::string ArithmeticPrompt(int64_t a, int64_t b) { return absl::StrCat(a, "+", b, "="); }

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
  const int64_t side = options.max_operand + 1;
  const int64_t num_pairs = side * side;
  // A seeded permutation of all pairs; the first eval_fraction of it is held out.
  std::vector<int64_t> order = EpochOrder(options.seed ^ 0xA417'8ECAull, 0, num_pairs);
  const int64_t num_held_out =
      std::clamp<int64_t>(static_cast<int64_t>(options.eval_fraction * num_pairs), 1,
                          num_pairs - 1);
  std::vector<Example> train, eval;
  for (int64_t i = num_held_out; i < num_pairs; ++i) {
    train.push_back(MakeExample(order[i] / side, order[i] % side));
  }
  for (int64_t i = 0; i < options.eval_size; ++i) {
    const int64_t pair = order[i % num_held_out];
    eval.push_back(MakeExample(pair / side, pair % side));
  }
  return ArithmeticTask{Dataset(std::move(train), "arithmetic(train)"),
                        Dataset(std::move(eval), "arithmetic(eval)")};
}

}  // namespace lockstep
