// A reward server the job started dies mid-run (issue 21 item 3): it is restarted on the same
// port within [rewards] max_restarts, the client's retries of its items in flight reach the new
// process, and once the budget is spent its items fail and are counted, never dropped.
#include <unistd.h>

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
using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunLockstep;

// Each process of the server answers 3 Score calls (one call per prompt), then SIGKILLs itself
// when the 4th arrives: 4 processes (3 restarts) answer 12 of the job's 16 prompts.
std::string JobToml() {
  return absl::StrCat(R"(
[job]
steps = 4
seed = 3
[model]
preset = "tiny"
mode = "batch_invariant"
[data]
task = "arithmetic"
eval_size = 0
[generator]
count = 1
max_tokens = 8
[algorithm]
prompts_per_step = 4
samples_per_prompt = 4
drop_zero_variance_groups = false
[parity]
mode = "strict"
[logging]
progress = false
[rewards]
builtin = "math"
max_restarts = 3
[[rewards.servers]]
name = "fragile"
command = [")",
                      LOCKSTEP_FAULT_REWARD_SERVER, R"(", "--die-after-calls", "3"]
deadline_ms = 2000
max_attempts = 8
weight = 0.5
)");
}

TEST(RewardRestartTest, DeadRewardServerIsRestartedItsItemsRetriedAndTheRestCounted) {
  const fs::path root = test_support::FreshTestDirectory("lockstep_reward_faults");
  std::ofstream(root / "job.toml") << JobToml();
  const Outcome run =
      RunLockstep(test_support::RunArgs(root / "job.toml", root, "fragile"), root / "run.log");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("service reward_fragile"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("restarting reward_fragile (restart 3 of 3)"), std::string::npos)
      << run.output;

  const fs::path dir = root / "fragile";
  const std::vector<nlohmann::json> lines = test_support::JsonLines(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  int64_t sent = 0, scored = 0, failed = 0;
  for (const nlohmann::json& line : lines) {
    EXPECT_EQ(line["reward_items_sent"].get<int64_t>(),
              line["reward_items_scored"].get<int64_t>() + line["reward_items_failed"].get<int64_t>());
    sent += line["reward_items_sent"].get<int64_t>();
    scored += line["reward_items_scored"].get<int64_t>();
    failed += line["reward_items_failed"].get<int64_t>();
  }
  // The calls that met a dying process were retried on its successor: nothing failed while the
  // budget lasted.
  EXPECT_EQ(lines[0]["reward_items_failed"], 0);
  EXPECT_EQ(lines[1]["reward_items_failed"], 0);
  // 4 processes x 3 calls x 4 items are scored and the calls after the budget fail, counted,
  // not dropped. A call that met a dying process fails too if its successors took longer to
  // start than the call's retries last, which a loaded machine can cause: one call can meet
  // two deaths (the 4 calls of a step run at once, and a retried call may be the one that ends
  // its successor), and under ctest -j2 on 2 cores 6 attempts (3.1 s of backoff) lost 1 call
  // (44 scored, 2026-12-03) and then 3 (36 scored, 2026-12-05). 8 attempts give 12.7 s; a
  // restart takes ~130 ms on an idle machine. Every item is accounted for either way.
  EXPECT_EQ(sent, 4 * 4 * 4);
  EXPECT_EQ(scored + failed, sent);
  EXPECT_LE(scored, 12 * 4);
  EXPECT_GE(scored, 10 * 4);
  EXPECT_GE(failed, 4 * 4);

  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir / "summary.json"));
  EXPECT_EQ(summary["restarts"], (nlohmann::json{{"reward_fragile", 3}}));
  EXPECT_EQ(summary["restarts_total"], 3);
  EXPECT_EQ(summary["reward_items_failed"], failed);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  const nlohmann::json& fragile = summary["rewards"]["reward_components"]["fragile"];
  EXPECT_EQ(fragile["items_sent"].get<int64_t>(),
            fragile["items_scored"].get<int64_t>() + fragile["items_failed"].get<int64_t>());
  EXPECT_GT(fragile["retries"].get<int64_t>(), 0);
  const nlohmann::json& prompts = summary["prompts"];
  fault_test::ExpectLedgerHolds(prompts);
  fs::remove_all(root);
}

}  // namespace
}  // namespace lockstep
