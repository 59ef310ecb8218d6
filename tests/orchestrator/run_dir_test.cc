// Run directory (create, refuse to overwrite, open), metrics.jsonl (append, torn last line,
// truncate for resume), the typed step record and its totals, the atomic summary and the run
// counter, and the console progress line.
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
#include "orchestrator/step_record.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/run_dir_test_XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

StepRecord Record(int step) {
  StepRecord record;
  record.step = step;
  record.reward_mean = 0.5312;
  record.accuracy = 0.61;
  record.parity = ParityRecord{.tokens_compared = 12034, .tokens_mismatched = 0};
  record.gen_tokens_per_s = 1234.0;
  record.train_tokens_per_s = 3456789.0;
  return record;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

TEST(RunDirTest, CreatesLayoutAndRefusesToOverwriteARun) {
  std::string root = TempDir() + "/runs";
  absl::StatusOr<RunDir> run = RunDir::Create(root, "demo");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->path(), root + "/demo");
  EXPECT_TRUE(fs::is_directory(run->logs_dir()));
  EXPECT_TRUE(fs::is_directory(run->checkpoints_dir()));
  EXPECT_EQ(run->log_path("trainer"), root + "/demo/logs/trainer.log");

  // An empty directory is not a run yet: creating again is fine, and so is a job that failed
  // before its first step (a config.toml only), which --resume and the report can open.
  EXPECT_TRUE(RunDir::Create(root, "demo").ok());
  EXPECT_TRUE(absl::IsNotFound(RunDir::Open(root + "/demo").status()));
  std::ofstream(run->config_path()) << "[job]\n";
  EXPECT_TRUE(RunDir::Create(root, "demo").ok());
  EXPECT_TRUE(RunDir::Open(root + "/demo").ok());

  std::ofstream(run->metrics_path()) << "{\"step\": 1}\n";
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
  JobSummary summary;
  summary.accuracy_before = 0.25;
  summary.accuracy_after = 0.9;
  summary.wall_s = 12.5;
  summary.staleness.counts = {{0, 40}, {2, 8}};
  ASSERT_TRUE(WriteSummary(*run, summary).ok());
  summary.accuracy_after = 0.95;
  summary.runs = 3;
  ASSERT_TRUE(WriteSummary(*run, summary).ok());
  absl::StatusOr<JobSummary> read = ReadSummary(*run);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(nlohmann::json(*read), nlohmann::json(summary));
  EXPECT_EQ(read->runs, 3);
  EXPECT_EQ(read->staleness.counts.at(2), 8);
  // A single-turn job has no episodes: the key is left out, not null.
  EXPECT_EQ(SummaryText(summary).find("episodes"), std::string::npos);
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
          StepRecord record = Record(t * 50 + i);
          record.time = StepTimes{1.5, 0.25, 2.0, 0.125, 0.0625, 3.9375};
          ASSERT_TRUE((*log)->Append(record).ok());
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  absl::StatusOr<std::vector<StepRecord>> records = ReadMetrics(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 200u);
  std::vector<int> steps;
  for (const StepRecord& record : *records) {
    steps.push_back(static_cast<int>(record.step));
    EXPECT_EQ(nlohmann::json(record.time),
              nlohmann::json(StepTimes{1.5, 0.25, 2.0, 0.125, 0.0625, 3.9375}));
    EXPECT_EQ(record.parity->tokens_compared, 12034);
  }
  std::sort(steps.begin(), steps.end());
  for (int i = 0; i < 200; ++i) EXPECT_EQ(steps[i], i);
}

TEST(MetricsLogTest, TornLastLineIsSkippedAndCorruptionElsewhereIsNamed) {
  std::string path = TempDir() + "/metrics.jsonl";
  std::ofstream(path) << "{\"step\": 1}\n{\"step\": 2}\n{\"step\": 3, \"rew";
  absl::StatusOr<std::vector<StepRecord>> records = ReadMetrics(path);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 2u);

  std::ofstream(path) << "{\"step\": 1}\ngarbage\n{\"step\": 3}\n";
  records = ReadMetrics(path);
  ASSERT_FALSE(records.ok());
  EXPECT_THAT(records.status().message(), HasSubstr(path + ":2: not a JSON object"));

  // A member of the wrong type is named with its line.
  std::ofstream(path) << "{\"step\": 1}\n{\"step\": 2, \"loss\": \"high\"}\n{\"step\": 3}\n";
  records = ReadMetrics(path);
  ASSERT_FALSE(records.ok());
  EXPECT_THAT(records.status().message(), HasSubstr(path + ":2: "));
  EXPECT_TRUE(absl::IsNotFound(ReadMetrics(path + ".missing").status()));
}

TEST(MetricsLogTest, TruncateAfterStepKeepsEarlierSteps) {
  std::string path = TempDir() + "/metrics.jsonl";
  {
    absl::StatusOr<std::unique_ptr<MetricsLog>> log = MetricsLog::Open(path);
    ASSERT_TRUE(log.ok());
    for (int step = 1; step <= 6; ++step) ASSERT_TRUE((*log)->Append(Record(step)).ok());
  }
  // A line of a newer build (a key this one does not know) is kept as it was.
  std::ofstream(path, std::ios::app) << "{\"step\":3,\"future_key\":1}\n";
  absl::StatusOr<std::vector<StepRecord>> kept = TruncateMetricsAfterStep(path, 4);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->size(), 5u);
  absl::StatusOr<std::vector<StepRecord>> records = ReadMetrics(path);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 5u);
  EXPECT_EQ(records->at(3).step, 4);
  EXPECT_NE(ReadFile(path).find("future_key"), std::string::npos);
  absl::StatusOr<std::vector<StepRecord>> missing = TruncateMetricsAfterStep(path + ".missing", 1);
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->empty());
}

TEST(RunDirTest, StartRunCountsRuns) {
  absl::StatusOr<RunDir> run = RunDir::Create(TempDir(), "r");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(*run->StartRun(), 1);
  EXPECT_EQ(*run->StartRun(), 2);
  EXPECT_EQ(*run->StartRun(), 3);
  std::ofstream(run->runs_path()) << "many\n";
  EXPECT_EQ(run->StartRun().status().code(), absl::StatusCode::kDataLoss);
}

TEST(StepRecordTest, UnsetMembersAreLeftOutAndReadBackUnset) {
  StepRecord record;
  record.step = 7;
  record.loss = 0.5;
  record.staleness = AgeCounts{{{0, 12}, {10, 3}}};
  EXPECT_EQ(MetricsLineText(record), R"({"loss":0.5,"staleness":{"0":12,"10":3},"step":7})");
  StepRecord read = nlohmann::json::parse(MetricsLineText(record)).get<StepRecord>();
  EXPECT_EQ(read.step, 7);
  EXPECT_EQ(read.loss, 0.5);
  EXPECT_FALSE(read.parity.has_value());
  EXPECT_FALSE(read.reward_mean.has_value());
  EXPECT_EQ(read.staleness->counts.at(10), 3);
}

TEST(StepRecordTest, TotalsFoldEveryStep) {
  RlTotals totals;
  for (int step = 1; step <= 3; ++step) {
    StepRecord record = Record(step);
    record.reward_items_sent = 16;
    record.reward_items_scored = 15;
    record.reward_items_failed = 1;
    record.rollouts_trained = 12;
    record.staleness = AgeCounts{{{0, 10}, {1, step}}};
    record.parity->max_abs_diff = 0.1 * step;
    totals.Add(record);
  }
  totals.Add(StepRecord{.step = 4});  // nothing but the step: counts as a step, adds nothing
  EXPECT_EQ(totals.steps, 4);
  EXPECT_EQ(totals.reward_items_sent, 48);
  EXPECT_EQ(totals.reward_items_failed, 3);
  EXPECT_EQ(totals.samples_trained, 36);
  EXPECT_EQ(totals.parity_tokens_compared, 3 * 12034);
  EXPECT_DOUBLE_EQ(totals.parity_max_abs_diff, 0.1 * 3);
  EXPECT_EQ(totals.ages.at(0), 30);
  EXPECT_EQ(totals.ages.at(1), 6);
}

TEST(ProgressLineTest, FormatsKnownValuesAndSkipsMissingOnes) {
  EXPECT_EQ(FormatProgress(Record(12), 100, absl::Seconds(151)),
            "step 12/100  reward 0.531  acc 0.610  parity 0/12,034 mismatched  gen 1.2k tok/s  "
            "train 3.5M tok/s  ETA 2m31s");
  EXPECT_EQ(FormatProgress(StepRecord{.step = 3, .loss = 1.0}, 10, -absl::Seconds(1)), "step 3/10");
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
