// The arithmetic task: the eval is held out by construction (no (a, b) pair of the eval is in
// the train or SFT sets), the sets are a function of (options, seed), answers are true sums
// except the weak teacher's share of carry-dropped SFT answers, and bad options are refused.
#include "data/arithmetic_task.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

std::pair<int64_t, int64_t> Operands(const Example& example) {
  return {example.metadata.at("a").get<int64_t>(), example.metadata.at("b").get<int64_t>()};
}

std::set<std::pair<int64_t, int64_t>> Pairs(const Dataset& dataset) {
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const Example& example : dataset.examples()) pairs.insert(Operands(example));
  return pairs;
}

TEST(ArithmeticTaskTest, SumWithoutCarryDropsEveryCarry) {
  EXPECT_EQ(SumWithoutCarry(3, 5), 8);
  EXPECT_EQ(SumWithoutCarry(7, 5), 2);
  EXPECT_EQ(SumWithoutCarry(5, 5), 0);
  EXPECT_EQ(SumWithoutCarry(17, 8), 15);
  EXPECT_EQ(SumWithoutCarry(19, 19), 28);
  EXPECT_EQ(SumWithoutCarry(95, 7), 92);
  EXPECT_EQ(SumWithoutCarry(0, 0), 0);
  EXPECT_EQ(SumWithoutCarry(12, 13), 25);  // no column carries: the true sum
}

TEST(ArithmeticTaskTest, EvalPairsAreNeverTrainedOn) {
  ArithmeticTaskOptions options;
  options.max_operand = 19;
  options.eval_size = 80;
  options.seed = 7;
  options.teacher_carry_error = 0.5;
  options.teacher_draws = 4;
  absl::StatusOr<ArithmeticTask> task = MakeArithmeticTask(options);
  ASSERT_TRUE(task.ok()) << task.status();
  // 400 pairs: 20% held out, every other pair trained once.
  EXPECT_EQ(task->train.num_examples(), 320u);
  EXPECT_EQ(task->eval.num_examples(), 80u);
  EXPECT_EQ(task->sft.num_examples(), 320u * 4);
  const auto train = Pairs(task->train), eval = Pairs(task->eval), sft = Pairs(task->sft);
  EXPECT_EQ(train.size(), 320u);
  EXPECT_EQ(eval.size(), 80u);  // distinct while eval_size <= the held-out pairs
  EXPECT_EQ(sft, train);
  for (const auto& pair : eval)
    EXPECT_EQ(train.count(pair), 0u) << pair.first << "+" << pair.second;
  for (const Example& example : task->eval.examples()) {
    const auto [a, b] = Operands(example);
    EXPECT_EQ(*example.prompt, std::to_string(a) + "+" + std::to_string(b) + "=");
    EXPECT_EQ(*example.answer, std::to_string(a + b));
  }
  for (const Example& example : task->train.examples()) {
    const auto [a, b] = Operands(example);
    EXPECT_EQ(*example.answer, std::to_string(a + b));  // RL is scored on true sums
  }
}

TEST(ArithmeticTaskTest, SameOptionsSameSetsAndTheSeedChangesTheSplit) {
  ArithmeticTaskOptions options;
  options.max_operand = 19;
  options.eval_size = 80;
  options.seed = 3;
  absl::StatusOr<ArithmeticTask> a = MakeArithmeticTask(options);
  absl::StatusOr<ArithmeticTask> b = MakeArithmeticTask(options);
  options.seed = 4;
  absl::StatusOr<ArithmeticTask> c = MakeArithmeticTask(options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t i = 0; i < a->eval.num_examples(); ++i) {
    EXPECT_EQ(*a->eval.example(i).prompt, *b->eval.example(i).prompt);
  }
  EXPECT_NE(Pairs(a->eval), Pairs(c->eval));
}

TEST(ArithmeticTaskTest, WeakTeacherDropsTheCarryInItsShareOfDraws) {
  ArithmeticTaskOptions options;
  options.max_operand = 19;
  options.eval_size = 10;
  options.teacher_carry_error = 0.7;
  options.teacher_draws = 10;
  absl::StatusOr<ArithmeticTask> task = MakeArithmeticTask(options);
  ASSERT_TRUE(task.ok()) << task.status();
  // Per pair: how many of its SFT answers are the true sum, and how many the carry-free one.
  std::map<std::pair<int64_t, int64_t>, std::pair<int, int>> counts;
  for (const Example& example : task->sft.examples()) {
    const auto [a, b] = Operands(example);
    const std::string answer = *example.answer;
    auto& [right, carry_free] = counts[{a, b}];
    if (answer == std::to_string(a + b)) {
      ++right;
    } else {
      ASSERT_EQ(answer, std::to_string(SumWithoutCarry(a, b))) << a << "+" << b;
      ++carry_free;
    }
  }
  int num_carry_pairs = 0;
  for (const auto& [pair, count] : counts) {
    const bool carries = SumWithoutCarry(pair.first, pair.second) != pair.first + pair.second;
    num_carry_pairs += carries;
    EXPECT_EQ(count.first, carries ? 3 : 10) << pair.first << "+" << pair.second;
    EXPECT_EQ(count.second, carries ? 7 : 0) << pair.first << "+" << pair.second;
  }
  EXPECT_GT(num_carry_pairs, 100);  // 45% of the unit-digit pairs carry

  // A perfect teacher (the default) writes every true sum once.
  options.teacher_carry_error = 0;
  options.teacher_draws = 1;
  task = MakeArithmeticTask(options);
  ASSERT_TRUE(task.ok()) << task.status();
  for (const Example& example : task->sft.examples()) {
    const auto [a, b] = Operands(example);
    EXPECT_EQ(*example.answer, std::to_string(a + b));
  }
}

TEST(ArithmeticTaskTest, BadOptionsNameTheOption) {
  const std::pair<const char*, void (*)(ArithmeticTaskOptions&)> cases[] = {
      {"max_operand", [](ArithmeticTaskOptions& o) { o.max_operand = 0; }},
      {"eval_fraction", [](ArithmeticTaskOptions& o) { o.eval_fraction = 1.0; }},
      {"eval_size", [](ArithmeticTaskOptions& o) { o.eval_size = 0; }},
      {"teacher_carry_error", [](ArithmeticTaskOptions& o) { o.teacher_carry_error = 1.5; }},
      {"teacher_draws", [](ArithmeticTaskOptions& o) { o.teacher_draws = 0; }},
  };
  for (const auto& [name, mutate] : cases) {
    ArithmeticTaskOptions options;
    mutate(options);
    absl::StatusOr<ArithmeticTask> task = MakeArithmeticTask(options);
    ASSERT_FALSE(task.ok()) << name;
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(task.status().message().find(name), std::string::npos) << task.status();
  }
}

}  // namespace
}  // namespace lockstep
