// The code variant of the arithmetic task: same pairs and held-out split as the arithmetic task,
// every example carries one stdin/stdout test that code_tests parses (expected output: the true
// sum), and the weak SFT teacher is right exactly as often as designed (every answer of a
// non-carry problem, 1 - round(error * draws) / draws of a carry problem's).
#include "data/arithmetic_code_task.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rewards/code_tests.h"

namespace lockstep {
namespace {

ArithmeticTaskOptions DemoOptions() {
  ArithmeticTaskOptions options;
  options.max_operand = 19;
  options.eval_size = 80;
  options.teacher_carry_error = 0.7;
  options.teacher_draws = 10;
  options.seed = 1;
  return options;
}

int64_t Operand(const Example& example, const char* name) {
  return example.metadata.at(name).get<int64_t>();
}

// What the teacher's one-line program prints: "print(N)" or "print(A+B)". -1 for anything else.
int64_t Printed(const std::string& program) {
  if (program.rfind("print(", 0) != 0 || program.back() != ')') return -1;
  const std::string inner = program.substr(6, program.size() - 7);
  int64_t sum = 0;
  for (absl::string_view term : absl::StrSplit(inner, '+')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(term, &value)) return -1;
    sum += value;
  }
  return sum;
}

TEST(ArithmeticCodeTaskTest, ExamplesCarryOneStdoutTestOfTheTrueSum) {
  absl::StatusOr<ArithmeticTask> task = MakeArithmeticCodeTask(DemoOptions());
  ASSERT_TRUE(task.ok()) << task.status();
  for (const Dataset* set : {&task->train, &task->eval}) {
    ASSERT_GT(set->num_examples(), 0u);
    for (const Example& example : set->examples()) {
      const int64_t a = Operand(example, "a"), b = Operand(example, "b");
      EXPECT_EQ(*example.prompt, ArithmeticCodePrompt(a, b));
      EXPECT_EQ(*example.answer, "print(" + std::to_string(a + b) + ")");
      // What the reward receives (metadata as strings) parses as code_tests' tests.
      absl::StatusOr<std::vector<rewards::CodeTest>> tests =
          rewards::ParseCodeTests(MetadataStrings(example).at("tests"));
      ASSERT_TRUE(tests.ok()) << tests.status();
      ASSERT_EQ(tests->size(), 1u);
      EXPECT_EQ((*tests)[0].input, "");
      EXPECT_EQ((*tests)[0].expected_output, std::to_string(a + b));
      EXPECT_TRUE((*tests)[0].compares_output);
    }
  }
  EXPECT_EQ(ArithmeticCodePrompt(17, 25), "print 17+25 in python:");
}

TEST(ArithmeticCodeTaskTest, SamePairsAndHeldOutSplitAsTheArithmeticTask) {
  absl::StatusOr<ArithmeticTask> code = MakeArithmeticCodeTask(DemoOptions());
  absl::StatusOr<ArithmeticTask> plain = MakeArithmeticTask(DemoOptions());
  ASSERT_TRUE(code.ok() && plain.ok());
  for (auto [c, p] : {std::pair{&code->train, &plain->train}, std::pair{&code->eval, &plain->eval},
                      std::pair{&code->sft, &plain->sft}}) {
    ASSERT_EQ(c->num_examples(), p->num_examples());
    for (size_t i = 0; i < c->num_examples(); ++i) {
      EXPECT_EQ(c->example(i).metadata.at("a"), p->example(i).metadata.at("a"));
      EXPECT_EQ(c->example(i).metadata.at("b"), p->example(i).metadata.at("b"));
    }
  }
  std::set<std::string> trained;
  for (const Example& e : code->train.examples()) trained.insert(*e.prompt);
  for (const Example& e : code->sft.examples()) trained.insert(*e.prompt);
  for (const Example& e : code->eval.examples()) EXPECT_EQ(trained.count(*e.prompt), 0u);
}

TEST(ArithmeticCodeTaskTest, TheTeacherIsRightAsOftenAsDesigned) {
  absl::StatusOr<ArithmeticTask> task = MakeArithmeticCodeTask(DemoOptions());
  ASSERT_TRUE(task.ok()) << task.status();
  int64_t carry_right = 0, carry_total = 0, plain_right = 0, plain_total = 0;
  for (const Example& example : task->sft.examples()) {
    const int64_t a = Operand(example, "a"), b = Operand(example, "b");
    const int64_t printed = Printed(*example.answer);
    ASSERT_GE(printed, 0) << *example.answer;
    const bool right = printed == a + b;
    // Right answers compute in Python; wrong ones are the carry-dropped literal.
    EXPECT_EQ(*example.answer, right ? "print(" + std::to_string(a) + "+" + std::to_string(b) + ")"
                                     : "print(" + std::to_string(SumWithoutCarry(a, b)) + ")");
    if (SumWithoutCarry(a, b) != a + b) {
      carry_right += right;
      ++carry_total;
    } else {
      plain_right += right;
      ++plain_total;
    }
  }
  ASSERT_GT(carry_total, 0);
  EXPECT_EQ(plain_right, plain_total);
  EXPECT_EQ(carry_right * 10, carry_total * 3);  // 3 of every 10 draws: round(0.7 * 10) wrong
}

TEST(ArithmeticCodeTaskTest, BadOptionsAreRefused) {
  ArithmeticTaskOptions options = DemoOptions();
  options.teacher_draws = 0;
  EXPECT_FALSE(MakeArithmeticCodeTask(options).ok());
}

}  // namespace
}  // namespace lockstep
