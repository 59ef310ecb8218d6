// Dead generators (issue 21): `lockstep run` with real processes, a generator killed with
// kill -9 mid-run. Proves that the job notices at once (the console names the generator and the
// signal), restarts it, re-forms the weight-sync group with the new process and gives it the
// current weights, generates the prompts it had in flight again with the same seeds, and ends
// with weights byte-identical to the same job run without the kill (batch-invariant mode, so the
// regenerated samples are the very same tokens), parity exact and every prompt accounted for;
// that the restarted generator takes the lost prompts still waiting in the step it died in;
// and that a spent restart budget stops the job cleanly after a checkpoint, which --resume
// continues.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/faults/fault_test_support.h"
#include "tests/support/run_lockstep.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunLockstep;
using test_support::SpawnLockstep;
using fault_test::ExpectLedgerHolds;
using fault_test::LineCount;
using fault_test::ProcessWritingTo;
using fault_test::WaitFor;

// Tiny model, on-policy GRPO, strict parity; a weight-sync timeout short enough that a sync
// broken by a death fails fast.
constexpr char kJobToml[] = R"(
[job]
steps = 6
seed = 3
[model]
preset = "tiny"
mode = "batch_invariant"
[data]
task = "arithmetic"
eval_size = 16
[sft]
steps = 3
batch_size = 16
[generator]
count = 2
max_tokens = 48
[trainer]
lr = 0.001
[algorithm]
prompts_per_step = 4
samples_per_prompt = 4
drop_zero_variance_groups = false
[rewards]
builtin = "math"
[async]
max_staleness = 0
[parity]
mode = "strict"
[weight_sync]
timeout_ms = 10000
[checkpointing]
every = 2
keep_last = 0
[logging]
progress = false
)";

class GeneratorRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::FreshTestDirectory("lockstep_faults");
    config_ = root_ / "job.toml";
    std::ofstream(config_) << kJobToml;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<std::string> Run(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = test_support::RunArgs(config_, root_, name);
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  fs::path RunDir(const std::string& name) const { return root_ / name; }

  // Waits for the job (`pid`) to end within `timeout`; its exit code (128 + signal if killed).
  static int WaitForJob(pid_t pid, std::chrono::seconds timeout) {
    int status = 0;
    const bool ended = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout);
    if (!ended) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "lockstep run did not end within " << timeout.count() << " s";
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  fs::path root_;
  fs::path config_;
};

TEST_F(GeneratorRestartTest, KilledGeneratorIsRestartedAndTheJobEndsWithTheSameWeights) {
  // One run without a kill; one killed mid-generation; one killed mid-training.
  Outcome clean = RunLockstep(Run("clean"), root_ / "clean.log");
  ASSERT_EQ(clean.exit_code, 0) << clean.output;

  const fs::path log = root_ / "killed.log";
  const pid_t job = SpawnLockstep(Run("killed"), log);
  const fs::path generator_log = fs::absolute(RunDir("killed") / "logs" / "generator1.log");
  const fs::path metrics = RunDir("killed") / "metrics.jsonl";
  pid_t generator = -1;
  ASSERT_TRUE(WaitFor([&] { return (generator = ProcessWritingTo(generator_log)) > 0; },
                      std::chrono::seconds(60)))
      << ReadFile(log);
  const pid_t live = ProcessWritingTo(fs::absolute(RunDir("killed") / "logs" / "generator0.log"));
  ASSERT_GT(live, 0);
  // Right after step 2's record the prompts of step 3 are being generated: freeze both
  // generators at once (their calls stay in flight), then kill generator1. Generator0 stays
  // frozen, so busy, until the new generator1 serves: of the two prompts lost, generator0 takes
  // one at once and the other waits for whichever generator is idle first, which must be the
  // restarted one, as soon as it holds the weights (in step 3, the step it died in).
  ASSERT_TRUE(WaitFor([&] { return LineCount(metrics) >= 2; }, std::chrono::seconds(120)))
      << ReadFile(log);
  ASSERT_EQ(kill(live, SIGSTOP), 0);
  ASSERT_EQ(kill(generator, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(generator, SIGKILL), 0);
  const bool serves = WaitFor(
      [&] { return ReadFile(log).find("generator1 serves again at") != std::string::npos; },
      std::chrono::seconds(60));
  ASSERT_EQ(kill(live, SIGCONT), 0);  // before any assertion can end the test
  ASSERT_TRUE(serves) << ReadFile(log);
  const int exit_code = WaitForJob(job, std::chrono::seconds(240));
  const std::string output = ReadFile(log);
  ASSERT_EQ(exit_code, 0) << output;

  EXPECT_NE(output.find(absl::StrCat("service generator1 (pid ", generator,
                                     ") was killed by signal 9 (Killed)")),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("restarting generator1 (restart 1 of 3)"), std::string::npos) << output;
  EXPECT_NE(output.find("generator1 is back at"), std::string::npos) << output;

  const nlohmann::json summary = nlohmann::json::parse(ReadFile(RunDir("killed") / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 6);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  EXPECT_GT(summary["parity_tokens_compared"].get<int64_t>(), 0);
  EXPECT_EQ(summary["restarts"], (nlohmann::json{{"generator1", 1}}));
  EXPECT_EQ(summary["restarts_total"], 1);
  const nlohmann::json& prompts = summary["prompts"];
  ExpectLedgerHolds(prompts);
  EXPECT_EQ(prompts["issued"], 6 * 4);
  EXPECT_EQ(prompts["in_flight"], 0);
  // Generator1 held step 3's prompts 1 and 3 when it froze: both were generated again.
  EXPECT_GE(prompts["resubmitted"].get<int64_t>(), 1) << prompts;
  // Its restart and the first samples of the new process are timed from its death; those come
  // after it holds the weights (no call goes to it before), and in the same step: the prompt
  // waiting for a generator went to it.
  double recovery_s = -1, first_sample_s = -1;
  int64_t restart_step = -1, first_sample_step = -1;
  for (const nlohmann::json& record : test_support::JsonLines(metrics)) {
    for (const nlohmann::json& restart : record.value("restarts", nlohmann::json::array())) {
      if (restart["service"] != "generator1") continue;
      recovery_s = restart["recovery_s"].get<double>();
      restart_step = record["step"].get<int64_t>();
    }
    for (const nlohmann::json& first : record.value("first_samples", nlohmann::json::array())) {
      if (first["service"] != "generator1") continue;
      first_sample_s = first["first_sample_s"].get<double>();
      first_sample_step = record["step"].get<int64_t>();
    }
  }
  EXPECT_GT(recovery_s, 0);
  EXPECT_GE(first_sample_s, recovery_s) << "no first_samples record of generator1, or too early";
  EXPECT_EQ(restart_step, 3);
  EXPECT_EQ(first_sample_step, restart_step)
      << "the restarted generator got no prompt in the step it died in";

  // The same tokens came back, so training went exactly as without the kill.
  const std::string clean_weights =
      ReadFile(RunDir("clean") / "checkpoints" / "step_000009" / "model.safetensors");
  ASSERT_FALSE(clean_weights.empty());
  EXPECT_TRUE(clean_weights ==
              ReadFile(RunDir("killed") / "checkpoints" / "step_000009" / "model.safetensors"))
      << "final weights differ from the uninterrupted run's";

  // Killed 150 ms after step 2's record, while the trainer trains step 3 (generation takes
  // ~50 ms here): the sync of step 3 meets the dead member, and is done again once the group
  // has re-formed with the restarted generator. The same weights again.
  const fs::path late_log = root_ / "late.log";
  const pid_t late_job = SpawnLockstep(Run("late"), late_log);
  const fs::path late_generator_log = fs::absolute(RunDir("late") / "logs" / "generator1.log");
  ASSERT_TRUE(WaitFor([&] { return LineCount(RunDir("late") / "metrics.jsonl") >= 2; },
                      std::chrono::seconds(120)))
      << ReadFile(late_log);
  const pid_t late_generator = ProcessWritingTo(late_generator_log);
  ASSERT_GT(late_generator, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(kill(late_generator, SIGKILL), 0);
  ASSERT_EQ(WaitForJob(late_job, std::chrono::seconds(240)), 0) << ReadFile(late_log);
  const nlohmann::json late = nlohmann::json::parse(ReadFile(RunDir("late") / "summary.json"));
  EXPECT_EQ(late["restarts"], (nlohmann::json{{"generator1", 1}}));
  EXPECT_EQ(late["parity_tokens_mismatched"], 0);
  ExpectLedgerHolds(late["prompts"]);
  EXPECT_TRUE(clean_weights ==
              ReadFile(RunDir("late") / "checkpoints" / "step_000009" / "model.safetensors"))
      << "final weights differ from the uninterrupted run's";
}

TEST_F(GeneratorRestartTest, SpentBudgetStopsCleanlyAfterACheckpointAndResumeContinues) {
  const fs::path log = root_ / "budget.log";
  const pid_t job = SpawnLockstep(
      Run("budget", {"--set", "generator.count=1", "--set", "generator.max_restarts=1"}), log);
  const fs::path generator_log = fs::absolute(RunDir("budget") / "logs" / "generator0.log");
  const fs::path metrics = RunDir("budget") / "metrics.jsonl";
  pid_t generator = -1;
  ASSERT_TRUE(WaitFor([&] { return LineCount(metrics) >= 1; }, std::chrono::seconds(120)))
      << ReadFile(log);
  generator = ProcessWritingTo(generator_log);
  ASSERT_GT(generator, 0);
  ASSERT_EQ(kill(generator, SIGKILL), 0);
  // Named on the console within a second (the supervisor reaps it the moment it dies).
  const std::string named =
      absl::StrCat("service generator0 (pid ", generator, ") was killed by signal 9 (Killed)");
  EXPECT_TRUE(WaitFor([&] { return ReadFile(log).find(named) != std::string::npos; },
                      std::chrono::seconds(1)))
      << ReadFile(log);
  // The only generator: the job waits for its restart, then goes on.
  ASSERT_TRUE(WaitFor([&] { return ReadFile(log).find("generator0 is back at") != std::string::npos; },
                      std::chrono::seconds(60)))
      << ReadFile(log);
  pid_t restarted = -1;
  ASSERT_TRUE(WaitFor([&] { return (restarted = ProcessWritingTo(generator_log)) > 0; },
                      std::chrono::seconds(10)));
  EXPECT_NE(restarted, generator);
  ASSERT_EQ(kill(restarted, SIGKILL), 0);
  const int exit_code = WaitForJob(job, std::chrono::seconds(120));
  const std::string output = ReadFile(log);
  EXPECT_NE(exit_code, 0) << output;
  EXPECT_NE(output.find("service generator0 was killed by signal 9 (Killed) and its restart "
                        "budget is spent ([generator] max_restarts = 1)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("stopping: writing a checkpoint first"), std::string::npos) << output;

  // The checkpoint holds the steps done; --resume finishes the job.
  Outcome resumed = RunLockstep({"run", "--resume", RunDir("budget").string()},
                                root_ / "resumed.log");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(RunDir("budget") / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 6);
  EXPECT_EQ(summary["runs"], 2);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  ExpectLedgerHolds(summary["prompts"]);
  EXPECT_EQ(summary["prompts"]["in_flight"], 0);
}

}  // namespace
}  // namespace lockstep
