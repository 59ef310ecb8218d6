// code_tests: the reward of code RL. Extracts the program from the completion (the last fenced
// block in the option's language, else the whole text), runs it in the sandbox against the
// example's tests, and scores the fraction passed (or 1/0 with all_or_nothing).
//
// The tests come from the item's metadata[tests_key] (default "tests"), a JSON text in one of
// the formats datasets use:
//   stdin/stdout (APPS / CodeContests / LiveCodeBench):
//     [{"input": "1 2\n", "output": "3\n"}, ...]   or   {"inputs": [...], "outputs": [...]}
//   assert-style (MBPP): {"asserts": ["assert add(1, 2) == 3", ...]} - one test per assert,
//     each appended to the program and run alone;
//   HumanEval: {"test": "def check(candidate): ...", "entry_point": "add"} - one test: the
//     program, the test code and `check(add)`.
// A stdin/stdout test passes when the program exits 0 and its stdout equals the expected output
// as whitespace-separated tokens; an assert-style test passes when the program exits 0.
//
// Sub-scores: "passed" (the fraction), "tests" (how many), "test_<i>" (1/0 each, the first
// max_reported_tests), "verdict_<name>" (how many runs ended with each sandbox verdict), so that
// the job's metrics show why programs fail.
//
// Failure policy: a wrong, crashing, timed-out or non-compiling program is a legitimate 0. The
// sandbox failing (verdict sandbox_error, or the executor erroring, e.g. the sandbox service is
// unreachable) makes the whole item an error status: failed and counted, never a silent 0.
// Metadata without parseable tests is an error too.
#ifndef LOCKSTEP_REWARDS_CODE_TESTS_H_
#define LOCKSTEP_REWARDS_CODE_TESTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rewards/reward.h"
#include "sandbox/exec.h"
#include "sandbox/executor.h"

namespace lockstep::rewards {

struct CodeTestsOptions {
  std::string language = "python3";  // a sandbox language: python3, cpp, bash
  bool all_or_nothing = false;       // 1 only if every test passes
  std::string tests_key = "tests";   // metadata key holding the tests JSON
  int64_t max_tests = 64;            // more tests than this in one item is an error
  int64_t max_reported_tests = 16;   // per-test sub-scores for the first N tests
  sandbox::ExecLimits limits = {.wall_ms = 4000, .cpu_ms = 4000, .memory_mb = 512,
                                .max_processes = 16, .max_output_bytes = 1 << 20};
};

// One test of an item.
struct CodeTest {
  std::string input;            // stdin (stdin/stdout tests)
  std::string expected_output;  // compared as tokens (stdin/stdout tests)
  std::string appended_code;    // appended to the program (assert-style tests)
  bool compares_output = true;
};

// Parses the tests JSON (formats above). InvalidArgument saying what is wrong.
absl::StatusOr<std::vector<CodeTest>> ParseCodeTests(absl::string_view json_text);

// The program in `completion`: the body of the last ``` fenced block tagged with `language`
// (python3 accepts python/py/python3, cpp accepts cpp/c++/cc/cxx, bash accepts bash/sh/shell),
// else the whole completion.
std::string ExtractProgram(absl::string_view completion, absl::string_view language);

// True iff `actual` and `expected` hold the same whitespace-separated tokens.
bool OutputsMatch(absl::string_view actual, absl::string_view expected);

class CodeTestsReward final : public Reward {
 public:
  // `executor` runs the programs (the in-process sandbox or a client of `lockstep serve
  // sandbox`); shared so that several rewards may use one. InvalidArgument for a bad option.
  static absl::StatusOr<std::unique_ptr<CodeTestsReward>> Create(
      CodeTestsOptions options, std::shared_ptr<sandbox::Executor> executor);

  absl::string_view name() const override { return "code_tests"; }
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override;

 private:
  CodeTestsReward(CodeTestsOptions options, std::shared_ptr<sandbox::Executor> executor)
      : options_(std::move(options)), executor_(std::move(executor)) {}

  CodeTestsOptions options_;
  std::shared_ptr<sandbox::Executor> executor_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_CODE_TESTS_H_
