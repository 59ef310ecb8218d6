// A seeded chaos run (issue 21): one schedule of kill -9s across a generator, the reward server
// and the trainer, each a little after a chosen step (which generator and how long after come
// from a fixed seed). The job completes; every service's restart is counted with its cause,
// each step is in metrics.jsonl once with its reward items all scored, the prompt ledger holds,
// the trainer's rollback is counted, and the final model.safetensors is byte-identical to the
// same job run without kills (CPU, batch-invariant mode).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
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
using fault_test::LineCount;
using fault_test::ProcessWritingTo;
using fault_test::WaitFor;
using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunLockstep;
using test_support::SpawnLockstep;

constexpr uint32_t kSeed = 21;

// 2 generators, the built-in math reward and a reward server (the fault server of
// tests/rewards, healthy: its reward is a pure function of the completion). SFT takes trainer
// steps 1-3; the last checkpoint is step_000009. The server answers each call after 600 ms, so
// that every RL step outlasts the schedule's delays (< 300 ms): each kill lands inside the step
// after the line it waited for, on a fast machine too (without it, steps 2-4 of the tiny model
// could pass within one delay and the trainer's kill land right after step 4's checkpoint).
std::string JobToml() {
  return absl::StrCat(R"(
[job]
steps = 6
seed = 7
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
count = 2
max_tokens = 16
[trainer]
lr = 0.001
[algorithm]
prompts_per_step = 4
samples_per_prompt = 4
drop_zero_variance_groups = false
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
[rewards]
builtin = "math"
max_restarts = 3
[[rewards.servers]]
name = "judge"
command = [")",
                      LOCKSTEP_FAULT_REWARD_SERVER, R"(", "--delay-ms", "600"]
deadline_ms = 2000
max_attempts = 8
weight = 0.5
)");
}

struct Kill {
  int64_t after_line;  // once metrics.jsonl has this many lines
  std::string service;
  int delay_ms;
};

TEST(ChaosTest, SeededKillsAcrossServicesEndWithExactCountsAndTheSameWeights) {
  const fs::path root = test_support::FreshTestDirectory("lockstep_chaos");
  std::ofstream(root / "job.toml") << JobToml();
  auto args = [&](const std::string& name) {
    return test_support::RunArgs(root / "job.toml", root, name);
  };
  const Outcome clean = RunLockstep(args("clean"), root / "clean.log");
  ASSERT_EQ(clean.exit_code, 0) << clean.output;

  std::mt19937 random(kSeed);
  const std::string generator = absl::StrCat("generator", random() % 2);
  // The trainer dies as soon as step 3's line is written, past the checkpoint of step 2 and
  // before step 4 (the next checkpoint) can train: it rolls back to step 2.
  const int generator_delay_ms = static_cast<int>(random() % 300);
  const int reward_delay_ms = static_cast<int>(random() % 300);
  const std::vector<Kill> schedule = {{1, generator, generator_delay_ms},
                                      {2, "reward_judge", reward_delay_ms},
                                      {3, "trainer", 0}};
  const fs::path dir = root / "chaos";
  const fs::path log = root / "chaos.log";
  const pid_t job = SpawnLockstep(args("chaos"), log);
  std::vector<pid_t> killed;
  for (const Kill& kill_at : schedule) {
    const bool reached = WaitFor(
        [&] { return LineCount(dir / "metrics.jsonl") >= kill_at.after_line; },
        std::chrono::seconds(120));
    if (!reached) kill(job, SIGKILL);
    ASSERT_TRUE(reached) << kill_at.service << "\n" << ReadFile(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_at.delay_ms));
    const pid_t pid =
        ProcessWritingTo(fs::absolute(dir / "logs" / (kill_at.service + ".log")));
    if (pid <= 0) kill(job, SIGKILL);
    ASSERT_GT(pid, 0) << kill_at.service;
    ASSERT_EQ(kill(pid, SIGKILL), 0) << kill_at.service;
    killed.push_back(pid);
  }
  int status = 0;
  const bool ended = WaitFor([&] { return waitpid(job, &status, WNOHANG) == job; },
                             std::chrono::seconds(240));
  if (!ended) kill(job, SIGKILL);
  ASSERT_TRUE(ended) << ReadFile(log);
  const std::string output = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  for (size_t i = 0; i < schedule.size(); ++i) {
    EXPECT_NE(output.find(absl::StrCat("service ", schedule[i].service, " (pid ", killed[i],
                                       ") was killed by signal 9 (Killed)")),
              std::string::npos)
        << schedule[i].service << "\n" << output;
  }

  // Counts: each step once, every reward item scored (the calls in flight at the reward
  // server's death were retried on its successor), each restart in the step that saw it.
  const std::vector<nlohmann::json> lines = test_support::JsonLines(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  std::multiset<std::string> restarted;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"], static_cast<int64_t>(i + 1));
    EXPECT_EQ(lines[i]["reward_items_sent"], 16) << lines[i];
    EXPECT_EQ(lines[i]["reward_items_failed"], 0) << lines[i];
    EXPECT_EQ(lines[i]["rollouts_trained"], 16) << lines[i];
    for (const nlohmann::json& restart : lines[i].value("restarts", nlohmann::json::array())) {
      restarted.insert(restart["service"].get<std::string>());
      EXPECT_EQ(restart["cause"], "was killed by signal 9 (Killed)") << restart;
      EXPECT_GT(restart["recovery_s"].get<double>(), 0.0) << restart;
    }
  }
  // The generator's and the reward server's restarts in steps that were rolled back are gone
  // with those steps' lines; the trainer's is in the first step after the rollback.
  EXPECT_EQ(restarted.count("trainer"), 1u);

  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 6);
  EXPECT_EQ(summary["restarts"],
            (nlohmann::json{{generator, 1}, {"reward_judge", 1}, {"trainer", 1}}));
  EXPECT_EQ(summary["restarts_total"], 3);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  EXPECT_EQ(summary["reward_items_failed"], 0);
  const nlohmann::json& rollbacks = summary["trainer_rollbacks"];
  EXPECT_EQ(rollbacks["rollbacks"], 1);
  EXPECT_GE(rollbacks["steps_discarded"].get<int64_t>(), 1) << output;
  EXPECT_EQ(rollbacks["rollouts_discarded"].get<int64_t>(),
            16 * rollbacks["steps_discarded"].get<int64_t>());
  const nlohmann::json& prompts = summary["prompts"];
  fault_test::ExpectLedgerHolds(prompts);
  EXPECT_EQ(prompts["in_flight"], 0);

  const std::string clean_weights =
      ReadFile(root / "clean" / "checkpoints" / "step_000009" / "model.safetensors");
  ASSERT_FALSE(clean_weights.empty());
  EXPECT_TRUE(clean_weights ==
              ReadFile(dir / "checkpoints" / "step_000009" / "model.safetensors"))
      << "final weights differ from the run without kills";
  if (!HasFailure()) fs::remove_all(root);  // kept for a look when something failed
}

}  // namespace
}  // namespace lockstep
