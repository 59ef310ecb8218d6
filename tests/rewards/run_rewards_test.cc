// Reward and environment servers inside `lockstep run` (real processes on loopback, tiny model,
// a few steps):
// - the Python example server started from a [[rewards.servers]] command scores every sample
//   (sent == scored + failed, failed == 0, per step and in summary.json);
// - a reward server that SIGKILLs itself mid-run: the run goes on to its last step, the items it
//   no longer scores are failed and counted, and sent == scored + failed across metrics.jsonl;
// - configs/demo_multiturn.toml (guess_number served by `lockstep serve environment`): episodes
//   train with the environment's tokens masked out (the trainer's loss tokens equal the model's
//   tokens, and parity compares exactly those).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/run_lockstep.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// Tiny model, short SFT warm start, on-policy GRPO; the reward section is appended per test.
constexpr char kJobToml[] = R"(
[job]
steps = 3
seed = 2
[model]
preset = "tiny"
[data]
task = "arithmetic"
eval_size = 0
[sft]
steps = 2
batch_size = 16
[generator]
max_tokens = 4
[trainer]
lr = 0.001
[algorithm]
prompts_per_step = 4
samples_per_prompt = 4
drop_zero_variance_groups = false
[parity]
mode = "strict"
[logging]
progress = false
)";

using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunLockstep;

std::vector<nlohmann::json> MetricsLines(const fs::path& run) {
  return test_support::JsonLines(run / "metrics.jsonl");
}

struct ItemCounts {
  int64_t sent = 0, scored = 0, failed = 0;
};

// Sums the reward item counts over metrics.jsonl, checking sent == scored + failed per line.
ItemCounts SumItems(const std::vector<nlohmann::json>& lines) {
  ItemCounts counts;
  for (const nlohmann::json& line : lines) {
    const int64_t sent = line["reward_items_sent"], scored = line["reward_items_scored"],
                  failed = line["reward_items_failed"];
    EXPECT_EQ(sent, scored + failed) << line.dump();
    counts.sent += sent;
    counts.scored += scored;
    counts.failed += failed;
  }
  return counts;
}

class RunRewardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::FreshTestDirectory("lockstep_run_rewards");
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes the job with `rewards_toml` appended and runs it as run `name`.
  Outcome RunJob(const std::string& name, const std::string& rewards_toml) {
    const fs::path config = root_ / (name + ".toml");
    std::ofstream(config) << kJobToml << rewards_toml;
    return RunLockstep(test_support::RunArgs(config, root_, name), root_ / (name + ".log"));
  }

  fs::path root_;
};

TEST_F(RunRewardsTest, PythonExampleServerScoresEverySample) {
  const Outcome run = RunJob("python", absl::StrCat(R"(
[rewards]
builtin = ""
[[rewards.servers]]
name = "py"
command = ["/usr/bin/python3", ")",
                                                    LOCKSTEP_SOURCE_DIR,
                                                    R"(/rewards/examples/python/reward_server.py"]
deadline_ms = 20000
)"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path dir = root_ / "python";
  EXPECT_NE(ReadFile(dir / "logs" / "reward_py.log").find("serving on 127.0.0.1:"),
            std::string::npos);
  const std::vector<nlohmann::json> lines = MetricsLines(dir);
  ASSERT_EQ(lines.size(), 3u);
  const ItemCounts counts = SumItems(lines);
  EXPECT_EQ(counts.sent, 3 * 4 * 4);
  EXPECT_EQ(counts.failed, 0);
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["reward_items_sent"], counts.sent);
  EXPECT_EQ(summary["reward_items_scored"], counts.scored);
  EXPECT_EQ(summary["reward_items_failed"], 0);
  // Every item went through the Python server (and only its reward counts).
  const nlohmann::json& py = summary["rewards"]["reward_components"]["py"];
  EXPECT_EQ(py["items_sent"], counts.sent) << summary.dump(2);
  EXPECT_EQ(py["items_scored"], counts.sent);
  EXPECT_EQ(py["items_failed"], 0);
  EXPECT_GE(py["rpcs"].get<int64_t>(), 12);  // one call per prompt at least
  EXPECT_EQ(summary["rewards"]["reward_components"].size(), 1u);
}

TEST_F(RunRewardsTest, ServerKilledMidRunFailsItsItemsAndTheRunContinues) {
  // The server answers 3 Score calls (one per prompt), then SIGKILLs itself; not restarted
  // (tests/faults/reward_restart_test covers restarts).
  const Outcome run = RunJob("fault", absl::StrCat(R"(
[rewards]
builtin = "math"
max_restarts = 0
[[rewards.servers]]
name = "fragile"
command = [")",
                                                   LOCKSTEP_FAULT_REWARD_SERVER,
                                                   R"(", "--die-after-calls", "3"]
deadline_ms = 2000
max_attempts = 2
weight = 0.5
)"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path dir = root_ / "fault";
  const std::vector<nlohmann::json> lines = MetricsLines(dir);
  ASSERT_EQ(lines.size(), 3u);  // every step ran
  const ItemCounts counts = SumItems(lines);
  EXPECT_EQ(counts.sent, 3 * 4 * 4);
  EXPECT_EQ(counts.sent, counts.scored + counts.failed);
  EXPECT_LE(counts.scored, 3 * 4);  // at most the 3 calls answered
  EXPECT_GE(counts.failed, 3 * 4 * 4 - 3 * 4);
  EXPECT_EQ(lines.back()["reward_items_failed"], 16);  // the server is long gone
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 3);
  EXPECT_EQ(summary["reward_items_sent"], counts.sent);
  EXPECT_EQ(summary["reward_items_failed"], counts.failed);
  const nlohmann::json& fragile = summary["rewards"]["reward_components"]["fragile"];
  EXPECT_EQ(fragile["items_sent"].get<int64_t>(),
            fragile["items_scored"].get<int64_t>() + fragile["items_failed"].get<int64_t>());
  EXPECT_EQ(fragile["items_sent"], counts.sent);  // each item sent once, retries not counted
  EXPECT_EQ(fragile["items_failed"], counts.failed);
  EXPECT_GT(fragile["retries"].get<int64_t>(), 0);
  // The built-in kept scoring: the failures are the server's alone.
  EXPECT_EQ(summary["rewards"]["reward_components"]["builtin:math"]["items_failed"], 0);
}

TEST_F(RunRewardsTest, MultiTurnDemoMasksTheEnvironmentsTokens) {
  const Outcome run = RunLockstep(
      {"run", LOCKSTEP_SOURCE_DIR "/configs/demo_multiturn.toml", "--name", "multiturn", "--set",
       absl::StrCat("job.output_root=\"", root_.string(), "\""), "--set", "job.steps=2", "--set",
       "sft.steps=2", "--set", "algorithm.prompts_per_step=4", "--set", "logging.progress=false"},
      root_ / "multiturn.log");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path dir = root_ / "multiturn";
  EXPECT_NE(ReadFile(dir / "logs" / "environment.log").find("serving on"), std::string::npos);
  const std::vector<nlohmann::json> lines = MetricsLines(dir);
  ASSERT_EQ(lines.size(), 2u);
  const ItemCounts counts = SumItems(lines);
  EXPECT_EQ(counts.sent, 2 * 4 * 4);
  for (const nlohmann::json& line : lines) {
    // The trainer's loss tokens are exactly the model's tokens of the batch; the environment's
    // tokens were sent too, masked out. On-policy, parity compares every model token.
    EXPECT_EQ(line["train_tokens"], line["rollout_model_tokens"]) << line.dump();
    EXPECT_GT(line["rollout_environment_tokens"].get<int64_t>(), 0) << line.dump();
    EXPECT_EQ(line["parity"]["tokens_compared"], line["rollout_model_tokens"]) << line.dump();
    EXPECT_EQ(line["parity"]["tokens_mismatched"], 0);
  }
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["episodes"]["episodes"], 2 * 4 * 4) << summary.dump(2);
  EXPECT_GE(summary["episodes"]["turns"].get<int64_t>(), 2 * 4 * 4);
  EXPECT_GT(summary["environment_tokens_trained"].get<int64_t>(), 0);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
}

}  // namespace
}  // namespace lockstep
