// The HTML report: every chart from a full synthetic metrics.jsonl, charts left out when their
// keys are missing, a self-contained page (no script, no external resource), and a real
// screenshot through scripts/render_report.sh in headless Chromium (installed by
// scripts/test.sh; the test fails without it).
#include "orchestrator/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "orchestrator/metrics_log.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/svg_chart.h"

#ifndef LOCKSTEP_SOURCE_DIR
#error "LOCKSTEP_SOURCE_DIR must name the source tree"
#endif

namespace lockstep::orchestrator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/report_test_XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

// A plausible run: reward rising, parity exact, ages 0..2.
std::vector<StepRecord> SyntheticRecords(int steps) {
  std::vector<StepRecord> records;
  for (int step = 1; step <= steps; ++step) {
    double progress = static_cast<double>(step) / steps;
    StepRecord record;
    record.step = step;
    record.reward_mean = 0.2 + 0.7 * progress;
    record.accuracy = 0.15 + 0.75 * progress;
    record.loss = 0.5 * std::exp(-progress);
    record.grad_norm = 1.0 + 0.3 * std::sin(step);
    record.gen_tokens_per_s = 900.0 + 10 * step;
    record.train_tokens_per_s = 2500.0 + 5 * step;
    record.parity = ParityRecord{.tokens_compared = 4000 + step};
    record.time =
        StepTimes{.generate = 1.2, .reward = 0.1, .train = 0.9, .sync = 0.2, .idle = 0.05};
    record.staleness =
        AgeCounts{{{0, 40}, {1, step % 3 == 0 ? 24 : 0}, {2, step % 5 == 0 ? 8 : 0}}};
    records.push_back(record);
  }
  return records;
}

absl::StatusOr<RunDir> WriteRun(const std::string& root, const std::vector<StepRecord>& records,
                                const std::optional<JobSummary>& summary) {
  absl::StatusOr<RunDir> run = RunDir::Create(root, "synthetic");
  if (!run.ok()) return run;
  absl::StatusOr<std::unique_ptr<MetricsLog>> log = MetricsLog::Open(run->metrics_path());
  if (!log.ok()) return log.status();
  for (const StepRecord& record : records) {
    if (absl::Status s = (*log)->Append(record); !s.ok()) return s;
  }
  if (summary.has_value()) {
    if (absl::Status s = WriteSummary(*run, *summary); !s.ok()) return s;
  }
  return run;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int Count(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST(ReportTest, FullMetricsGiveEveryChartInASelfContainedPage) {
  JobSummary summary;
  summary.accuracy_before = 0.15;
  summary.accuracy_after = 0.9;
  summary.parity_tokens_compared = 120465;
  summary.wall_s = 321.5;
  summary.eval_before.num_prompts = 200;
  absl::StatusOr<RunDir> run = WriteRun(TempDir(), SyntheticRecords(30), summary);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<std::string> path = WriteReport(run->path());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, run->path() + "/report.html");
  std::string html = ReadFile(*path);

  for (const char* title :
       {"Reward and accuracy", "Loss", "Grad norm", "Parity: tokens per step",
        "Parity: max |Δ logprob| per step", "Throughput", "Step time split",
        "Staleness: samples per policy age", "Staleness: max policy age per step"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<title>", EscapeXml(title)))) << title;
  }
  EXPECT_EQ(Count(html, "<svg "), 9);
  // 30 steps x 5 layers of the step-time split.
  EXPECT_GE(Count(html, "<rect x="), 150);
  // Summary rows, nested keys flattened, parity totals from the metrics.
  EXPECT_THAT(html, HasSubstr("<td>accuracy_after</td><td class=\"n\">0.9000</td>"));
  EXPECT_THAT(html, HasSubstr("<td>eval_before.num_prompts</td><td class=\"n\">200</td>"));
  EXPECT_THAT(html,
              HasSubstr("<td>parity: tokens compared (all steps)</td><td class=\"n\">120465"));
  // Self-contained: no script, nothing fetched.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
}

// A job without a held-out eval says so instead of showing accuracies of 0.
TEST(ReportTest, AJobWithoutEvalSaysNoEval) {
  JobSummary summary;
  summary.held_out_eval = false;
  summary.rl_steps = 30;
  absl::StatusOr<RunDir> run = WriteRun(TempDir(), SyntheticRecords(30), summary);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<std::string> path = WriteReport(run->path());
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string html = ReadFile(*path);
  EXPECT_THAT(html, HasSubstr("<td>held_out_eval</td><td class=\"n\">no eval (no eval set, "
                              "eval_size 0, or a multi-turn job)</td>"));
  for (const char* key : {"accuracy_before", "accuracy_after", "eval_before", "eval_after"}) {
    EXPECT_THAT(html, Not(HasSubstr(absl::StrCat("<td>", key)))) << key;
  }
  EXPECT_THAT(html, HasSubstr("<td>rl_steps</td><td class=\"n\">30</td>"));

  // With an eval the accuracies are there, measured.
  summary.held_out_eval = true;
  summary.eval_before.num_prompts = 3;
  summary.accuracy_after = 0.5;
  run = WriteRun(TempDir(), SyntheticRecords(30), summary);
  ASSERT_TRUE(run.ok()) << run.status();
  path = WriteReport(run->path());
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string with_eval = ReadFile(*path);
  EXPECT_THAT(with_eval, HasSubstr("<td>accuracy_after</td><td class=\"n\">0.5000</td>"));
  EXPECT_THAT(with_eval, HasSubstr("<td>held_out_eval</td><td class=\"n\">true</td>"));
  EXPECT_THAT(with_eval, Not(HasSubstr("no eval")));
}

TEST(ReportTest, ChartsWithoutDataAreLeftOut) {
  std::vector<StepRecord> records = {{.step = 1, .loss = 2.0}, {.step = 2, .loss = 1.5}};
  absl::StatusOr<RunDir> run = WriteRun(TempDir(), records, std::nullopt);
  ASSERT_TRUE(run.ok()) << run.status();
  std::string out = run->path() + "/elsewhere.html";
  ASSERT_TRUE(WriteReport(run->path(), out).ok());
  std::string html = ReadFile(out);
  EXPECT_EQ(Count(html, "<svg "), 1);
  EXPECT_THAT(html, HasSubstr("<title>Loss"));
  EXPECT_THAT(html, Not(HasSubstr("Parity")));
  EXPECT_THAT(html, Not(HasSubstr("Staleness")));
  EXPECT_THAT(html, HasSubstr("no summary.json yet"));

  std::string empty = RenderReportHtml("empty", {}, std::nullopt);
  EXPECT_THAT(empty, HasSubstr("No metrics recorded yet"));
  EXPECT_EQ(Count(empty, "<svg "), 0);
}

TEST(ReportTest, MissingRunIsNotFound) {
  absl::StatusOr<std::string> path = WriteReport(TempDir() + "/nope");
  EXPECT_TRUE(absl::IsNotFound(path.status())) << path.status();
}

TEST(SvgChartTest, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(NiceTicks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  std::vector<double> ticks = NiceTicks(3, 997);
  EXPECT_LE(ticks.front(), 3);
  EXPECT_GE(ticks.back(), 997);
  EXPECT_DOUBLE_EQ(ticks[1] - ticks[0], 200);
  EXPECT_EQ(EscapeXml("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

// The browser from PATH, or "".
std::string FindChromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (std::system(absl::StrCat("command -v ", name, " > /dev/null 2>&1").c_str()) == 0) {
      return name;
    }
  }
  return "";
}

TEST(ReportTest, RendersInHeadlessChromium) {
  // Never skipped: scripts/test.sh installs Debian's chromium for the tests.
  ASSERT_FALSE(FindChromium().empty())
      << "chromium is not installed: run scripts/test.sh, or apt-get install chromium";
  std::string dir = TempDir();
  absl::StatusOr<RunDir> run = WriteRun(dir, SyntheticRecords(40), JobSummary{.wall_s = 10.0});
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<std::string> page = WriteReport(run->path());
  ASSERT_TRUE(page.ok()) << page.status();

  std::string png = dir + "/report.png";
  std::string command =
      absl::StrCat("WINDOW_SIZE=1200,2400 " LOCKSTEP_SOURCE_DIR "/scripts/render_report.sh ", *page,
                   " ", png, " > ", dir, "/render.log 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile(dir + "/render.log");
  std::string image = ReadFile(png);
  ASSERT_GE(image.size(), 24u);
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(image[at])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(image[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(image[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(image[at + 3]));
  };
  EXPECT_EQ(be32(16), 1200u);  // IHDR width
  EXPECT_EQ(be32(20), 2400u);  // IHDR height
  // A blank page of this size compresses to a few kilobytes; charts and text do not.
  EXPECT_GT(image.size(), 40000u) << "the screenshot looks empty";
}

}  // namespace
}  // namespace lockstep::orchestrator
