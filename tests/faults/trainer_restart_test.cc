// A dead trainer (issue 21 item 4): killed with kill -9 after the checkpoint of step 2, it is
// restarted from that checkpoint and the job rolls back to it (data cursor and RNG from the
// checkpoint, the generators get its weights); the job completes and its final model.safetensors
// is byte-identical to the same job run without the kill (CPU, batch-invariant mode); a generator
// killed at the same moment is restarted before the weight-sync group re-forms.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/faults/fault_test_support.h"
#include "tests/support/run_lockstep.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using fault_test::LineCount;
using fault_test::ProcessWritingTo;
using fault_test::WaitFor;
using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunLockstep;
using test_support::SpawnLockstep;

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
max_tokens = 16
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

// Runs the job once cleanly and once with `services` killed (in this order, at once) as step 3's
// line appears; the killed run completes, restarts each service once, and ends with the clean
// run's weights.
void KillAfterStep3AndCompareWeights(const std::string& test_name,
                                     const std::vector<std::string>& services) {
  const fs::path root = test_support::FreshTestDirectory(test_name);
  std::ofstream(root / "job.toml") << kJobToml;
  auto args = [&](const std::string& name) {
    return test_support::RunArgs(root / "job.toml", root, name);
  };
  const Outcome clean = RunLockstep(args("clean"), root / "clean.log");
  ASSERT_EQ(clean.exit_code, 0) << clean.output;

  const fs::path log = root / "killed.log";
  const pid_t job = SpawnLockstep(args("killed"), log);
  // Step 3 is past the checkpoint of step 2: it is lost with the trainer and runs again. That
  // checkpoint is written in the background, and on a loaded machine its write can outlast step
  // 3: the kill waits for it (its directory appears by rename once complete).
  const bool reached = WaitFor(
      [&] {
        return LineCount(root / "killed" / "metrics.jsonl") >= 3 &&
               fs::exists(root / "killed" / "checkpoints" / "step_000005");
      },
      std::chrono::seconds(120));
  if (!reached) kill(job, SIGKILL);
  ASSERT_TRUE(reached) << ReadFile(log);
  std::vector<pid_t> pids;
  for (const std::string& service : services) {
    pids.push_back(ProcessWritingTo(fs::absolute(root / "killed" / "logs" / (service + ".log"))));
  }
  nlohmann::json expected_restarts = nlohmann::json::object();
  for (size_t i = 0; i < services.size(); ++i) {
    if (pids[i] <= 0) kill(job, SIGKILL);
    ASSERT_GT(pids[i], 0) << services[i];
    ASSERT_EQ(kill(pids[i], SIGKILL), 0) << services[i];
    expected_restarts[services[i]] = 1;
  }
  int status = 0;
  const bool ended = WaitFor([&] { return waitpid(job, &status, WNOHANG) == job; },
                             std::chrono::seconds(240));
  if (!ended) kill(job, SIGKILL);
  ASSERT_TRUE(ended) << ReadFile(log);
  const std::string output = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  for (size_t i = 0; i < services.size(); ++i) {
    EXPECT_NE(output.find(absl::StrCat("service ", services[i], " (pid ", pids[i],
                                       ") was killed by signal 9 (Killed)")),
              std::string::npos)
        << output;
  }
  EXPECT_NE(output.find("restarting the trainer (restart 1 of 3) from its last checkpoint"),
            std::string::npos)
      << output;

  const nlohmann::json summary = nlohmann::json::parse(ReadFile(root / "killed" / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 6);
  EXPECT_EQ(summary["restarts"], expected_restarts);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  EXPECT_EQ(LineCount(root / "killed" / "metrics.jsonl"), 6);  // each step once
  const std::string clean_weights =
      ReadFile(root / "clean" / "checkpoints" / "step_000009" / "model.safetensors");
  ASSERT_FALSE(clean_weights.empty());
  EXPECT_TRUE(clean_weights ==
              ReadFile(root / "killed" / "checkpoints" / "step_000009" / "model.safetensors"))
      << "final weights differ from the uninterrupted run's";
  if (!::testing::Test::HasFailure()) fs::remove_all(root);
}

TEST(TrainerRestartTest, KilledTrainerRestartsFromItsCheckpointAndTheWeightsAreIdentical) {
  KillAfterStep3AndCompareWeights("lockstep_trainer_faults", {"trainer"});
}

// The trainer and a generator killed together: both come back, whichever death the loop meets
// first (the generator's restart cannot re-form the group while the trainer is dead; the
// trainer's restart brings back a generator whose death the loop has not handled yet, since a
// dead member would leave the re-formed group waiting out its timeout), and the weights are the
// clean run's.
TEST(TrainerRestartTest, TrainerAndGeneratorKilledTogetherBothComeBack) {
  KillAfterStep3AndCompareWeights("lockstep_trainer_generator_faults", {"trainer", "generator1"});
}

}  // namespace
}  // namespace lockstep
