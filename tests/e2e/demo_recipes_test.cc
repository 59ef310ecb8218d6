// The demo recipes (configs/demo.toml, configs/demo_async.toml): they load and validate, they
// are the same job but for max_staleness (and the name), and their eval is held out: none of
// its (a, b) pairs is in the SFT or RL sets the job builds from the same options and seed.
// configs/demo_code.toml: the code variant, rewarded by code_tests, its eval held out too.
// configs/demo_moe.toml: demo.toml on the qwen3_moe architecture, nothing else changed.
#include <set>
#include <string>
#include <utility>

#include "data/arithmetic_code_task.h"
#include "data/arithmetic_task.h"
#include "gtest/gtest.h"
#include "orchestrator/config.h"

namespace lockstep::orchestrator {
namespace {

JobConfig Load(const std::string& name) {
  absl::StatusOr<JobConfig> config = LoadJobConfig(LOCKSTEP_SOURCE_DIR "/configs/" + name);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : JobConfig{};
}

TEST(DemoRecipesTest, DemoIsOnPolicyStrictParityWithAWarmStart) {
  const JobConfig demo = Load("demo.toml");
  EXPECT_EQ(demo.model.mode, "batch_invariant");
  EXPECT_EQ(demo.parity.mode, "strict");
  EXPECT_EQ(demo.async.max_staleness, 0);
  EXPECT_EQ(demo.data.task, "arithmetic");
  EXPECT_GT(demo.sft.steps, 0);
  EXPECT_GT(demo.data.eval_size, 0);
}

TEST(DemoRecipesTest, AsyncDemoIsTheSameJobWithStalenessTwo) {
  JobConfig demo = Load("demo.toml"), async = Load("demo_async.toml");
  EXPECT_EQ(async.async.max_staleness, 2);
  async.async.max_staleness = demo.async.max_staleness;
  async.job.name = demo.job.name;
  demo.source = async.source = "";
  EXPECT_EQ(ResolvedConfigToml(demo), ResolvedConfigToml(async));
}

ArithmeticTaskOptions TaskOptions(const JobConfig& demo) {
  ArithmeticTaskOptions options;
  options.max_operand = demo.data.max_operand;
  options.eval_size = demo.data.eval_size;
  options.teacher_carry_error = demo.data.teacher_carry_error;
  options.teacher_draws = demo.data.teacher_draws;
  options.seed = static_cast<uint64_t>(demo.job.seed);
  return options;
}

void ExpectEvalHeldOut(const absl::StatusOr<ArithmeticTask>& task) {
  ASSERT_TRUE(task.ok()) << task.status();
  std::set<std::string> trained, evaluated;
  for (const Example& e : task->train.examples()) trained.insert(*e.prompt);
  for (const Example& e : task->sft.examples()) trained.insert(*e.prompt);
  for (const Example& e : task->eval.examples()) evaluated.insert(*e.prompt);
  EXPECT_EQ(evaluated.size(), task->eval.num_examples()) << "every eval problem distinct";
  for (const std::string& prompt : evaluated) EXPECT_EQ(trained.count(prompt), 0u) << prompt;
}

TEST(DemoRecipesTest, TheEvalIsHeldOutFromSftAndRl) {
  ExpectEvalHeldOut(MakeArithmeticTask(TaskOptions(Load("demo.toml"))));
}

TEST(DemoRecipesTest, MoeDemoIsTheDemoOnAMixtureOfExperts) {
  JobConfig demo = Load("demo.toml"), moe = Load("demo_moe.toml");
  EXPECT_EQ(moe.model.arch, "qwen3_moe");
  EXPECT_EQ(moe.algorithm.moe_aux_loss_coef, 0.0);  // off in RL
  // Otherwise the same job: the same task, SFT warm start, strict parity, on-policy.
  moe.model.arch = demo.model.arch;
  moe.job.name = demo.job.name;
  demo.source = moe.source = "";
  EXPECT_EQ(ResolvedConfigToml(demo), ResolvedConfigToml(moe));
}

TEST(DemoRecipesTest, CodeDemoIsOnPolicyStrictParityRewardedByRunningPrograms) {
  const JobConfig demo = Load("demo_code.toml");
  EXPECT_EQ(demo.model.mode, "batch_invariant");
  EXPECT_EQ(demo.parity.mode, "strict");
  EXPECT_EQ(demo.async.max_staleness, 0);
  EXPECT_EQ(demo.data.task, "arithmetic_code");
  EXPECT_EQ(demo.rewards.builtin, "code_tests");
  EXPECT_GT(demo.sft.steps, 0);
  EXPECT_GT(demo.data.eval_size, 0);
  ExpectEvalHeldOut(MakeArithmeticCodeTask(TaskOptions(demo)));
}

}  // namespace
}  // namespace lockstep::orchestrator
