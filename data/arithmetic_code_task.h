// The code variant of the arithmetic task (data/arithmetic_task.h), for the code-reward demo:
// the prompt asks for a one-line Python program that prints the sum ("print 17+8 in python:"),
// and the reward executes the program (rewards/code_tests.h) instead of reading the answer.
//
// Same pairs, same held-out split, same seed as the arithmetic task. Every train and eval
// example carries code_tests metadata: metadata["tests"] = [{"input": "", "output": "25"}]
// (one stdin/stdout test: no input, the true sum as the expected output), next to "a" and "b".
// The reference answer is the literal program, "print(25)".
//
// The SFT teacher is weak in two ways at once. On a problem whose sum carries it does the sum
// in its head and drops the carry in round(teacher_carry_error * teacher_draws) of its
// teacher_draws answers ("print(15)" for 17+8: wrong). Its other answers let Python add
// ("print(17+8)": right, whatever the operands). Imitating it leaves the model writing the
// carry-dropping literal on a share of its samples; a reward that runs the program favours the
// programs that compute, which RL has to learn.
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_DATA_ARITHMETIC_CODE_TASK_H_
#define LOCKSTEP_DATA_ARITHMETIC_CODE_TASK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/arithmetic_task.h"

namespace lockstep {

// The prompt text of a + b, e.g. "print 3+5 in python:".
std::string ArithmeticCodePrompt(int64_t a, int64_t b);

// Builds the task from the arithmetic task's options (their errors, named "arithmetic task").
// train, eval and sft hold the same pairs, in the same order, as MakeArithmeticTask(options).
absl::StatusOr<ArithmeticTask> MakeArithmeticCodeTask(const ArithmeticTaskOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_ARITHMETIC_CODE_TASK_H_
