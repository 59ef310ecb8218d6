// The synthetic verifiable task of the demo job: integer addition, "a+b=" -> "c".
//
// Problems are drawn from a seeded generator, so a job's train and held-out eval sets are a
// function of (options, seed) alone. The eval set is held out by construction: it contains only
// (a, b) pairs that the train set never shows (pairs are split, not examples), so accuracy on it
// measures the rule, not memorised rows. The reference answer is the decimal sum; the prompt is
// plain text (no chat template), so a byte-level tokenizer sees a handful of tokens.
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_DATA_ARITHMETIC_TASK_H_
#define LOCKSTEP_DATA_ARITHMETIC_TASK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/jsonl_dataset.h"

namespace lockstep {

struct ArithmeticTaskOptions {
  int64_t max_operand = 9;      // operands are in [0, max_operand]
  double eval_fraction = 0.2;   // share of the (a, b) pairs held out for eval
  int64_t eval_size = 200;      // eval examples at most (pairs repeat only if there are fewer)
  uint64_t seed = 0;
};

struct ArithmeticTask {
  Dataset train;  // every non-held-out pair once; iterate with DatasetIterator for epochs
  Dataset eval;   // held-out pairs
};

// The prompt text of a + b, e.g. "3+5=".
std::string ArithmeticPrompt(int64_t a, int64_t b);

// Builds the task. InvalidArgument naming the option for max_operand < 1 or > 9999,
// eval_fraction outside (0, 1) or eval_size < 1.
absl::StatusOr<ArithmeticTask> MakeArithmeticTask(const ArithmeticTaskOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_ARITHMETIC_TASK_H_
