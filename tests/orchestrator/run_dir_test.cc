// Run directory (create, refuse to overwrite, open), metrics.jsonl (append, torn last line,
// truncate for resume), atomic summary, and the console progress line.
#include "orchestrator/run_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "orchestrator/metrics_log.h"
#include "orchestrator/progress_line.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/run_dir_test_XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

TEST(RunDirTest, CreatesLayoutAndRefusesToOverwriteARun) {
  std::string root = TempDir() + "/runs";
  absl::StatusOr<RunDir> run = RunDir::Create(root, "demo");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->path(), root + "/demo");
  EXPECT_TRUE(fs::is_directory(run->logs_dir()));
  EXPECT_TRUE(fs::is_directory(run->checkpoints_dir()));
  EXPECT_EQ(run->log_path("trainer"), root + "/demo/logs/trainer.log");

  // An empty directory is not a run yet: creating again is fine.
  EXPECT_TRUE(RunDir::Create(root, "demo").ok());
  EXPECT_TRUE(absl::IsNotFound(RunDir::Open(root + "/demo").status()));

  std::ofstream(run->config_path()) << "[job]\n";
  absl::StatusOr<RunDir> again = RunDir::Create(root, "demo");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("--resume " + root + "/demo"));

  absl::StatusOr<RunDir> opened = RunDir::Open(root + "/demo/");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->path(), root + "/demo");
  EXPECT_TRUE(absl::IsNotFound(RunDir::Open(root + "/missing").status()));
}

TEST(RunDirTest, SummaryIsWrittenAtomicallyAndReadBack) {
  absl::StatusOr<RunDir> run = RunDir::Create(TempDir(), "s");
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(absl::IsNotFound(ReadSummary(*run).status()));
  nlohmann::json summary = {{"accuracy_before", 0.25}, {"accuracy_after", 0.9}, {"wall_s", 12.5}};
  ASSERT_TRUE(WriteSummary(*run, summary).ok());
  summary["accuracy_after"] = 0.95;
  ASSERT_TRUE(WriteSummary(*run, summary).ok());
  absl::StatusOr<nlohmann::json> read = ReadSummary(*run);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, summary);
  // No temporary file is left next to it.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(run->path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(MetricsLogTest, AppendsLinesFromManyThreadsAndReadsThemBack) {
  std::string path = TempDir() + "/metrics.jsonl";
  {
    absl::StatusOr<std::unique_ptr<MetricsLog>> log = MetricsLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          ASSERT_TRUE((*log)->Append({{"step", t * 50 + i}, {"text", std::string(200, 'x')}}).ok());
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_FALSE((*log)->Append(nlohmann::json::array()).ok());
  }
  absl::StatusOr<std::vector<nlohmann::json>> records = ReadMetrics(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 200u);
  std::vector<int> steps;
  for (const nlohmann::json& record : *records) steps.push_back(record["step"].get<int>());
  std::sort(steps.begin(), steps.end());
  for (int i = 0; i < 200; ++i) EXPECT_EQ(steps[i], i);
}

TEST(MetricsLogTest, TornLastLineIsSkippedAndCorruptionElsewhereIsNamed) {
  std::string path = TempDir() + "/metrics.jsonl";
  std::ofstream(path) << "{\"step\": 1}\n{\"step\": 2}\n{\"step\": 3, \"rew";
  absl::StatusOr<std::vector<nlohmann::json>> records = ReadMetrics(path);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 2u);

  std::ofstream(path) << "{\"step\": 1}\ngarbage\n{\"step\": 3}\n";
  records = ReadMetrics(path);
  ASSERT_FALSE(records.ok());
  EXPECT_THAT(records.status().message(), HasSubstr(path + ":2: not a JSON object"));
  EXPECT_TRUE(absl::IsNotFound(ReadMetrics(path + ".missing").status()));
}

TEST(MetricsLogTest, TruncateAfterStepKeepsEarlierSteps) {
  std::string path = TempDir() + "/metrics.jsonl";
  {
    absl::StatusOr<std::unique_ptr<MetricsLog>> log = MetricsLog::Open(path);
    ASSERT_TRUE(log.ok());
    for (int step = 1; step <= 6; ++step) ASSERT_TRUE((*log)->Append({{"step", step}}).ok());
  }
  ASSERT_TRUE(TruncateMetricsAfterStep(path, 4).ok());
  absl::StatusOr<std::vector<nlohmann::json>> records = ReadMetrics(path);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 4u);
  EXPECT_EQ(records->back()["step"], 4);
  EXPECT_TRUE(TruncateMetricsAfterStep(path + ".missing", 1).ok());
}

nlohmann::json Record(int step) {
  return {{"step", step},
          {"reward_mean", 0.5312},
          {"accuracy", 0.61},
          {"parity", {{"tokens_compared", 12034}, {"tokens_mismatched", 0}}},
          {"gen_tokens_per_s", 1234.0},
          {"train_tokens_per_s", 3456789.0}};
}

TEST(ProgressLineTest, FormatsKnownValuesAndSkipsMissingOnes) {
  EXPECT_EQ(FormatProgress(Record(12), 100, absl::Seconds(151)),
            "step 12/100  reward 0.531  acc 0.610  parity 0/12,034 mismatched  gen 1.2k tok/s  "
            "train 3.5M tok/s  ETA 2m31s");
  EXPECT_EQ(FormatProgress({{"step", 3}, {"loss", 1.0}}, 10, -absl::Seconds(1)), "step 3/10");
  EXPECT_EQ(HumanDuration(absl::Seconds(3725)), "1h02m");
  EXPECT_EQ(HumanCount(950), "950");
}

std::string ReadAll(FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text += static_cast<char>(c);
  return text;
}

TEST(ProgressLineTest, RedrawsInPlaceOnATerminalAndPrintsLinesOtherwise) {
  const absl::Time start = absl::UnixEpoch();
  FILE* file = std::tmpfile();
  ProgressLine interactive(10, file, /*enabled=*/true, /*interactive=*/true);
  interactive.Update(Record(1), start);
  interactive.Update(Record(2), start + absl::Seconds(2));
  interactive.Finish();
  std::string text = ReadAll(file);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 2);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  // 2 s for one step, 8 steps to go.
  EXPECT_THAT(text, HasSubstr("step 2/10"));
  EXPECT_THAT(text, HasSubstr("ETA 16s"));
  std::fclose(file);

  file = std::tmpfile();
  ProgressLine plain(10, file, /*enabled=*/true, /*interactive=*/false);
  plain.Update(Record(1), start);
  plain.Message("checkpoint written");
  plain.Update(Record(2), start + absl::Seconds(1));
  plain.Finish();
  text = ReadAll(file);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_THAT(text, HasSubstr("\ncheckpoint written\nstep 2/10"));
  std::fclose(file);

  file = std::tmpfile();
  ProgressLine off(10, file, /*enabled=*/false, /*interactive=*/false);
  off.Update(Record(1), start);
  off.Finish();
  EXPECT_EQ(ReadAll(file), "");
  std::fclose(file);
}

}  // namespace
}  // namespace lockstep::orchestrator
