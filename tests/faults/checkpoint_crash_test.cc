// Background checkpoints (issue 21 item 6) under a crash: the job is killed with kill -9 while
// the trainer writes the checkpoint of RL step 4 in the background. Training went on during
// the write (steps 5 and 6 ran while it was stalled), the crash leaves the checkpoint of step 2
// intact and step 4's only as a .tmp directory, and `--resume` loads step 2 and ends with the
// same final model.safetensors as the run without the crash (CPU, batch-invariant mode).
//
// The write is made to stall by LOCKSTEP_TEST_CHECKPOINT_STALL_STEP (test only, see
// trainer/checkpoint_manager.cc): the write of that trainer step stops after its files are in
// step_N.tmp/ and before its manifest and rename, so the kill always lands mid-write.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// SFT takes trainer steps 1-3, so RL step k is trainer step 3 + k: the checkpoints of RL steps
// 2, 4 and 6 are step_000005, step_000007 and step_000009.
constexpr char kJobToml[] = R"(
[job]
steps = 6
seed = 5
[model]
preset = "tiny"
mode = "batch_invariant"
[data]
task = "arithmetic"
eval_size = 0
[sft]
steps = 3
batch_size = 16
[generator]
count = 1
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
[checkpointing]
every = 2
keep_last = 0
[logging]
progress = false
)";

TEST(CheckpointCrashTest, KillDuringABackgroundWriteKeepsThePreviousCheckpointForResume) {
  const fs::path root = test_support::FreshTestDirectory("lockstep_checkpoint_crash");
  std::ofstream(root / "job.toml") << kJobToml;
  auto args = [&](const std::string& name) {
    return test_support::RunArgs(root / "job.toml", root, name);
  };
  const Outcome clean = RunLockstep(args("clean"), root / "clean.log");
  ASSERT_EQ(clean.exit_code, 0) << clean.output;

  const fs::path dir = root / "crashed";
  const fs::path checkpoints = dir / "checkpoints";
  const fs::path log = root / "crashed.log";
  setenv("LOCKSTEP_TEST_CHECKPOINT_STALL_STEP", "7", 1);
  const pid_t job = SpawnLockstep(args("crashed"), log);
  unsetenv("LOCKSTEP_TEST_CHECKPOINT_STALL_STEP");
  // The write of step 7 has its files and stalls; the trainer meanwhile trains steps 5 and 6.
  const bool stalled_and_trained = WaitFor(
      [&] {
        return fs::exists(checkpoints / "step_000007.tmp" / "trainer_state.json") &&
               LineCount(dir / "metrics.jsonl") >= 6;
      },
      std::chrono::seconds(180));
  if (!stalled_and_trained) kill(job, SIGKILL);
  ASSERT_TRUE(stalled_and_trained) << ReadFile(log);
  EXPECT_FALSE(fs::exists(checkpoints / "step_000007"));
  const pid_t trainer = ProcessWritingTo(fs::absolute(dir / "logs" / "trainer.log"));
  ASSERT_GT(trainer, 0);
  // The machine goes down: the job and the trainer die at once. (The trainer alone would get
  // its parent-death SIGTERM and, shutting down, finish the write it has in flight.)
  ASSERT_EQ(kill(job, SIGKILL), 0);
  ASSERT_EQ(kill(trainer, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  // No one may reap the trainer here, so a zombie counts as gone.
  ASSERT_TRUE(WaitFor([&] { return fault_test::IsGone(trainer); }, std::chrono::seconds(10)));

  // The steps after each background checkpoint report how long it held the trainer, and a
  // write that finished (step 5's) is reported with its duration.
  const std::vector<nlohmann::json> lines = test_support::JsonLines(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_TRUE(lines[2].contains("checkpoint_blocking_ms")) << lines[2];
  EXPECT_TRUE(lines[4].contains("checkpoint_blocking_ms")) << lines[4];
  EXPECT_FALSE(lines[1].contains("checkpoint_blocking_ms")) << lines[1];
  int64_t writes_reported = 0;
  for (const nlohmann::json& line : lines) writes_reported += line.contains("checkpoint_write_ms");
  EXPECT_EQ(writes_reported, 1);  // step 5's; step 7's never finished

  EXPECT_TRUE(fs::exists(checkpoints / "step_000005" / "manifest.json"));
  EXPECT_FALSE(fs::exists(checkpoints / "step_000007"));
  const Outcome resumed =
      RunLockstep({"run", "--resume", dir.string()}, root / "resumed.log");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step_000005 after RL step 2"), std::string::npos)
      << resumed.output;
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 6);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  EXPECT_EQ(LineCount(dir / "metrics.jsonl"), 6);  // each step once
  EXPECT_TRUE(fs::exists(checkpoints / "step_000007" / "manifest.json"));
  const std::string clean_weights =
      ReadFile(root / "clean" / "checkpoints" / "step_000009" / "model.safetensors");
  ASSERT_FALSE(clean_weights.empty());
  EXPECT_TRUE(clean_weights == ReadFile(checkpoints / "step_000009" / "model.safetensors"))
      << "final weights differ from the uninterrupted run's";
  fs::remove_all(root);
}

}  // namespace
}  // namespace lockstep
