// A run records its mismatched rollouts and `lockstep diagnose runs/<name>` replays them, end to
// end with real services: the records and the weights they were scored with land under
// runs/<name>/mismatches/ (bounded by parity.max_records and parity.max_record_steps), a
// strict stop names the diagnose command, and the replay gives back the generator's log-probs.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_lockstep.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test_support::FreshTestDirectory;
using test_support::JsonLines;
using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunArgs;
using test_support::RunLockstep;

constexpr char kJobToml[] = R"(
[job]
steps = 2
seed = 11
[model]
preset = "tiny"
[data]
task = "arithmetic"
eval_size = 0
[generator]
count = 1
max_tokens = 6
[trainer]
lr = 0.001
[algorithm]
prompts_per_step = 2
samples_per_prompt = 4
drop_zero_variance_groups = false
[rewards]
builtin = "math"
[logging]
progress = false
)";

class DiagnoseRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshTestDirectory("diagnose_run");
    std::ofstream(root_ / "job.toml") << kJobToml;
  }
  void TearDown() override {
    unsetenv("LOCKSTEP_TEST_NUDGE_PARITY");
    fs::remove_all(root_);
  }
  Outcome Run(const std::string& name, const std::vector<std::string>& sets) {
    return RunLockstep(RunArgs(root_ / "job.toml", root_, name, sets), root_ / (name + ".log"));
  }
  Outcome Diagnose(const std::string& name, const fs::path& json) {
    return RunLockstep({"diagnose", (root_ / name).string(), "--json", json.string()},
                       root_ / (name + "-diagnose.log"));
  }

  fs::path root_;
};

// Fast kernels: trainer and generator reduce in different orders, so tokens mismatch on most
// steps. parity = "report" goes on; every mismatched step up to max_record_steps is recorded.
TEST_F(DiagnoseRunTest, FastRunRecordsBoundedMismatchesThatDiagnoseReplays) {
  const Outcome run = Run("fast", {"model.mode=\"fast\"", "parity.mode=\"report\"",
                                   "parity.max_records=2", "parity.max_record_steps=1"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path mismatches = root_ / "fast" / "mismatches";
  std::vector<fs::path> files, weights;
  for (const auto& entry : fs::directory_iterator(mismatches)) {
    (entry.is_directory() ? weights : files).push_back(entry.path());
  }
  ASSERT_EQ(files.size(), 1u) << "max_record_steps = 1";
  ASSERT_EQ(weights.size(), 1u) << "one weights copy per recorded step";
  EXPECT_TRUE(fs::exists(weights[0] / "config.json"));
  EXPECT_TRUE(fs::exists(weights[0] / "model.safetensors"));
  const std::vector<nlohmann::json> records = JsonLines(files[0]);
  ASSERT_GE(records.size(), 1u);
  EXPECT_LE(records.size(), 2u) << "max_records = 2";
  const int64_t step = records[0]["step"].get<int64_t>();
  EXPECT_EQ(files[0].filename(), absl::StrFormat("step-%06d.jsonl", step));
  // The step's metrics say it mismatched, and the record is that step's rollout.
  const std::vector<nlohmann::json> metrics = JsonLines(root_ / "fast" / "metrics.jsonl");
  ASSERT_GE(metrics.size(), static_cast<size_t>(step));
  EXPECT_GT(metrics[step - 1]["parity"]["tokens_mismatched"].get<int64_t>(), 0);
  for (const nlohmann::json& record : records) {
    EXPECT_EQ(record["generator"]["mode"], "fast");
    EXPECT_EQ(record["generator_logprobs"].size(), record["completion_tokens"].size());
    EXPECT_EQ(record["weights_dir"], absl::StrCat("mismatches/", weights[0].filename().string()));
  }

  const fs::path json = root_ / "fast-report.json";
  const Outcome diagnose = Diagnose("fast", json);
  ASSERT_TRUE(diagnose.exit_code == 0 || diagnose.exit_code == 1) << diagnose.output;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(report["replay"]["records"].get<size_t>(), records.size());
  int64_t completion_tokens = 0;
  for (const nlohmann::json& record : records) completion_tokens += record["completion_tokens"].size();
  EXPECT_EQ(report["replay"]["tokens_compared"].get<int64_t>(), completion_tokens);
  if (diagnose.exit_code == 1) {
    // Where the two paths part is named: an op whose inputs were still identical.
    EXPECT_FALSE(report["first_divergence"].is_null()) << diagnose.output;
  }

  // max_records = 0: the same mismatching run records nothing.
  const Outcome none = Run("none", {"model.mode=\"fast\"", "parity.mode=\"report\"",
                                    "parity.max_records=0"});
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_GT(nlohmann::json::parse(ReadFile(root_ / "none" / "summary.json"))
                ["parity_tokens_mismatched"].get<int64_t>(), 0);
  EXPECT_FALSE(fs::exists(root_ / "none" / "mismatches"));
}

// Batch-invariant kernels give identical log-probs; the trainer's test hook nudges its first
// compared log-prob by one ULP, so strict parity stops at step 1. The stop names the diagnose
// command, the records are on disk before it, and the replay reproduces the generator's
// log-probs bit for bit and finds the real computations identical (the nudge is not in them).
TEST_F(DiagnoseRunTest, StrictStopRecordsAndTheReplayReproducesTheGeneratorBitForBit) {
  setenv("LOCKSTEP_TEST_NUDGE_PARITY", "1", 1);
  const Outcome run = Run("strict", {"parity.max_records=3"});
  unsetenv("LOCKSTEP_TEST_NUDGE_PARITY");
  ASSERT_NE(run.exit_code, 0) << run.output;
  const fs::path run_dir = root_ / "strict";
  EXPECT_NE(run.output.find(absl::StrCat("lockstep diagnose ", run_dir.string())),
            std::string::npos)
      << run.output;
  const std::vector<nlohmann::json> records = JsonLines(run_dir / "mismatches" / "step-000001.jsonl");
  ASSERT_EQ(records.size(), 1u) << "the nudge touches one token of one rollout";
  EXPECT_EQ(records[0]["step"], 1);
  EXPECT_EQ(records[0]["generator"]["mode"], "batch_invariant");
  EXPECT_TRUE(fs::exists(run_dir / "mismatches" / "weights-v0" / "model.safetensors"));

  const fs::path json = root_ / "strict-report.json";
  const Outcome diagnose = Diagnose("strict", json);
  EXPECT_EQ(diagnose.exit_code, 0) << diagnose.output;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  EXPECT_TRUE(report["replay"]["reproduced"].get<bool>()) << report.dump(1);
  EXPECT_EQ(report["replay"]["tokens_compared"].get<int64_t>(),
            static_cast<int64_t>(records[0]["completion_tokens"].size()));
  EXPECT_TRUE(report["identical"].get<bool>());
}

}  // namespace
}  // namespace lockstep
