// The synthetic verifiable task of the demo job: integer addition, "a+b=" -> "c".
//
// Problems are drawn from a seeded generator, so a job's train and held-out eval sets are a
// function of (options, seed) alone. The eval set is held out by construction: it contains only
// (a, b) pairs that the train set never shows (pairs are split, not examples), so accuracy on it
// measures the rule, not memorised rows. The reference answer is the decimal sum; the prompt is
// plain text (no chat template), so a byte-level tokenizer sees a handful of tokens.
//
// The SFT warm-start set is the train pairs as written by a (possibly) weak teacher: each train
// pair appears `teacher_draws` times, and on a problem whose sum carries, the teacher drops the
// carries in round(teacher_carry_error * teacher_draws) of them (17+8 -> "15": digit-wise sums
// mod 10). The RL train set and the eval set always carry the true sum, which the reward checks:
// RL has to learn what imitation of the teacher could not. The SFT set holds train pairs only.
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
  int64_t max_operand = 9;     // operands are in [0, max_operand]
  double eval_fraction = 0.2;  // share of the (a, b) pairs held out for eval
  int64_t eval_size = 200;     // eval examples at most (pairs repeat only if there are fewer)
  uint64_t seed = 0;
  double teacher_carry_error = 0.0;  // share of a carry problem's SFT answers without the carry
  int64_t teacher_draws = 1;         // SFT examples per train pair
};

struct ArithmeticTask {
  Dataset train;  // every non-held-out pair once; iterate with DatasetIterator for epochs
  Dataset eval;   // held-out pairs
  Dataset sft;    // train pairs as the teacher answers them (see above), teacher_draws each
};

// The prompt text of a + b, e.g. "3+5=".
std::string ArithmeticPrompt(int64_t a, int64_t b);

// a + b without carrying: each decimal digit is (digit of a + digit of b) mod 10, leading zeros
// dropped (17+8 -> 15, 5+5 -> 0). Equals a + b iff no column carries. a, b >= 0.
int64_t SumWithoutCarry(int64_t a, int64_t b);

// Builds the task. InvalidArgument naming the option for max_operand < 1 or > 9999,
// eval_fraction outside (0, 1), eval_size < 1, teacher_carry_error outside [0, 1] or
// teacher_draws < 1.
absl::StatusOr<ArithmeticTask> MakeArithmeticTask(const ArithmeticTaskOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_ARITHMETIC_TASK_H_
