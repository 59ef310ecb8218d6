#include "orchestrator/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_io.h"
#include "orchestrator/metrics_log.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/svg_chart.h"

namespace lockstep::orchestrator {
namespace {

// Colors that stay distinct for color-blind readers (Okabe–Ito).
constexpr char kBlue[] = "#0072B2";
constexpr char kOrange[] = "#E69F00";
constexpr char kGreen[] = "#009E73";
constexpr char kRed[] = "#D55E00";
constexpr char kPurple[] = "#CC79A7";
constexpr char kGrey[] = "#999999";

constexpr char kStyle[] = R"(
body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.sub{color:#666;font-size:13px;margin-bottom:16px}
.grid{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px}
table{border-collapse:collapse;background:#fff;font-size:13px}
td,th{border:1px solid #ddd;padding:4px 10px;text-align:left}th{background:#f0f0f0}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#007a4d;font-weight:bold}.bad{color:#c0392b;font-weight:bold}
svg .t{font-size:14px;font-weight:bold;fill:#222}svg .k{font-size:11px;fill:#444}
svg .g{stroke:#eee;stroke-width:1}svg .a{stroke:#888;stroke-width:1}
)";

// A member of a step record, when it is set.
using Field = std::function<std::optional<double>(const StepRecord&)>;

// x of record i: its step, else its position (1-based).
double StepOf(const StepRecord& record, size_t index) {
  return record.step > 0 ? static_cast<double>(record.step) : static_cast<double>(index + 1);
}

LineSeries Series(const std::vector<StepRecord>& records, const Field& field,
                  const std::string& name, const std::string& color) {
  LineSeries series{name, color, {}};
  for (size_t i = 0; i < records.size(); ++i) {
    if (std::optional<double> value = field(records[i])) {
      series.points.emplace_back(StepOf(records[i], i), *value);
    }
  }
  return series;
}

// Field of an optional member (double or integer).
template <typename T>
Field Member(std::optional<T> StepRecord::*member) {
  return [member](const StepRecord& record) -> std::optional<double> {
    const std::optional<T>& value = record.*member;
    if (!value) return std::nullopt;
    return static_cast<double>(*value);
  };
}

// Field of the parity group.
template <typename T>
Field ParityMember(T ParityRecord::*member) {
  return [member](const StepRecord& record) -> std::optional<double> {
    if (!record.parity) return std::nullopt;
    return static_cast<double>((*record.parity).*member);
  };
}

// A line chart of the series that have data; "" when none has.
std::string Lines(const ChartFrame& frame, std::vector<LineSeries> series) {
  series.erase(std::remove_if(series.begin(), series.end(),
                              [](const LineSeries& s) { return s.points.empty(); }),
               series.end());
  if (series.empty()) return "";
  return LineChartSvg(frame, series);
}

std::string StepTimeChart(const std::vector<StepRecord>& records) {
  struct Part {
    std::string name;
    std::string color;
    double StepTimes::*seconds;
  };
  const std::vector<Part> parts = {{"generate", kBlue, &StepTimes::generate},
                                   {"reward", kOrange, &StepTimes::reward},
                                   {"train", kGreen, &StepTimes::train},
                                   {"sync", kPurple, &StepTimes::sync},
                                   {"idle", kGrey, &StepTimes::idle}};
  std::vector<double> x;
  std::vector<BarLayer> layers;
  for (const Part& part : parts) layers.push_back({part.name, part.color, {}});
  bool any = false;
  for (size_t i = 0; i < records.size(); ++i) {
    x.push_back(StepOf(records[i], i));
    any = any || records[i].time.has_value();
    for (size_t p = 0; p < parts.size(); ++p) {
      layers[p].values.push_back(records[i].time ? (*records[i].time).*parts[p].seconds : 0);
    }
  }
  if (!any) return "";
  return StackedBarChartSvg({.title = "Step time split", .x_label = "step", .y_label = "seconds"},
                            x, layers);
}

// Policy ages over the whole run (samples per age) and the per-step maximum age.
std::string StalenessCharts(const std::vector<StepRecord>& records) {
  std::map<int64_t, double> histogram;
  LineSeries max_age{"max policy age", kRed, {}};
  for (size_t i = 0; i < records.size(); ++i) {
    const StepRecord& record = records[i];
    if (!record.staleness) continue;
    int64_t step_max = -1;
    for (const auto& [age, count] : record.staleness->counts) {
      histogram[age] += static_cast<double>(count);
      if (count > 0) step_max = std::max<int64_t>(step_max, age);
    }
    if (step_max >= 0) max_age.points.emplace_back(StepOf(record, i), step_max);
  }
  if (histogram.empty()) return "";
  std::vector<std::string> labels;
  std::vector<double> values;
  for (int64_t age = 0; age <= histogram.rbegin()->first; ++age) {
    labels.push_back(std::to_string(age));
    values.push_back(histogram.count(age) ? histogram[age] : 0);
  }
  std::string svg =
      absl::StrCat("<div class=\"card\">",
                   BarChartSvg({.title = "Staleness: samples per policy age (all steps)",
                                .x_label = "policy age (steps)",
                                .y_label = "samples"},
                               labels, values, kBlue),
                   "</div>");
  absl::StrAppend(
      &svg, "<div class=\"card\">",
      LineChartSvg(
          {.title = "Staleness: max policy age per step", .x_label = "step", .y_label = "age"},
          {max_age}),
      "</div>");
  return svg;
}

std::string FormatValue(const nlohmann::json& value) {
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_number()) {
    double number = value.get<double>();
    return std::fabs(number) >= 1e4 || (number != 0 && std::fabs(number) < 1e-3)
               ? absl::StrFormat("%.4g", number)
               : absl::StrFormat("%.4f", number);
  }
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// The summary as a two-column table (nested objects flattened to dotted keys), with totals
// computed from the metrics first.
std::string SummaryTable(const std::vector<StepRecord>& records,
                         const std::optional<JobSummary>& job_summary) {
  std::vector<std::pair<std::string, std::string>> rows;
  RlTotals totals;
  bool has_parity = false;
  for (const StepRecord& record : records) {
    totals.Add(record);
    has_parity = has_parity || record.parity.has_value();
  }
  const double compared = static_cast<double>(totals.parity_tokens_compared);
  const double mismatched = static_cast<double>(totals.parity_tokens_mismatched);
  const double max_diff = totals.parity_max_abs_diff;
  rows.emplace_back("steps in metrics.jsonl", std::to_string(records.size()));
  if (has_parity) {
    rows.emplace_back("parity: tokens compared (all steps)", absl::StrFormat("%.0f", compared));
    rows.emplace_back("parity: tokens mismatched (all steps)",
                      absl::StrCat("<span class=\"", mismatched == 0 ? "ok" : "bad", "\">",
                                   absl::StrFormat("%.0f", mismatched), "</span>"));
    rows.emplace_back("parity: max |Δ logprob|", absl::StrFormat("%.3g", max_diff));
  }
  std::string html = "<table><tr><th>metric</th><th>value</th></tr>";
  for (const auto& [key, value] : rows) {
    absl::StrAppend(&html, "<tr><td>", EscapeXml(key), "</td><td class=\"n\">", value,
                    "</td></tr>");
  }
  if (job_summary.has_value()) {
    nlohmann::json summary = *job_summary;
    DropNullMembers(summary);
    // A job without a held-out eval has no accuracies to show, only zeros; a summary from before
    // held_out_eval existed has it false, so its eval counts decide.
    if (!job_summary->held_out_eval && job_summary->eval_before.num_prompts == 0 &&
        job_summary->eval_after.num_prompts == 0) {
      for (const char* key :
           {"accuracy_before", "accuracy_after", "eval_before", "eval_before_run", "eval_after"}) {
        summary.erase(key);
      }
      summary["held_out_eval"] = "no eval (no eval set, eval_size 0, or a multi-turn job)";
    }
    for (const auto& [key, value] : summary.items()) {
      if (value.is_object()) {
        for (const auto& [inner, inner_value] : value.items()) {
          absl::StrAppend(&html, "<tr><td>", EscapeXml(key + "." + inner), "</td><td class=\"n\">",
                          EscapeXml(FormatValue(inner_value)), "</td></tr>");
        }
      } else {
        absl::StrAppend(&html, "<tr><td>", EscapeXml(key), "</td><td class=\"n\">",
                        EscapeXml(FormatValue(value)), "</td></tr>");
      }
    }
  }
  absl::StrAppend(&html, "</table>");
  return html;
}

void AddCard(std::string* html, const std::string& svg) {
  if (!svg.empty()) absl::StrAppend(html, "<div class=\"card\">", svg, "</div>");
}

}  // namespace

std::string RenderReportHtml(const std::string& title, const std::vector<StepRecord>& records,
                             const std::optional<JobSummary>& summary) {
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>lockstep run ",
      EscapeXml(title), "</title><style>", kStyle, "</style></head><body>\n<h1>lockstep run ",
      EscapeXml(title), "</h1><div class=\"sub\">", records.size(), " step records",
      summary.has_value() ? ", summary.json present" : ", no summary.json yet (run in progress?)",
      "</div>\n");
  if (records.empty()) absl::StrAppend(&html, "<p>No metrics recorded yet.</p>");

  std::string learning;
  AddCard(&learning, Lines({.title = "Reward and accuracy", .x_label = "step", .y_label = ""},
                           {Series(records, Member(&StepRecord::reward_mean), "reward mean", kBlue),
                            Series(records, Member(&StepRecord::accuracy), "accuracy", kOrange)}));
  AddCard(&learning,
          Lines({.title = "Loss", .x_label = "step", .y_label = "", .y_from_zero = false},
                {Series(records, Member(&StepRecord::loss), "loss", kGreen)}));
  AddCard(&learning, Lines({.title = "Grad norm", .x_label = "step", .y_label = ""},
                           {Series(records, Member(&StepRecord::grad_norm),
                                   "grad norm (before clipping)", kPurple)}));
  if (!learning.empty())
    absl::StrAppend(&html, "<h2>Learning</h2><div class=\"grid\">", learning, "</div>\n");

  std::string parity;
  AddCard(
      &parity,
      Lines({.title = "Parity: tokens per step", .x_label = "step", .y_label = "tokens"},
            {Series(records, ParityMember(&ParityRecord::tokens_compared), "compared", kBlue),
             Series(records, ParityMember(&ParityRecord::tokens_mismatched), "mismatched", kRed)}));
  AddCard(&parity,
          Lines({.title = "Parity: max |Δ logprob| per step", .x_label = "step", .y_label = "nats"},
                {Series(records, ParityMember(&ParityRecord::max_abs_diff), "max |Δ|", kRed)}));
  if (!parity.empty()) {
    absl::StrAppend(&html, "<h2>Trainer / generator parity (policy age 0)</h2><div class=\"grid\">",
                    parity, "</div>\n");
  }

  std::string speed;
  AddCard(&speed,
          Lines({.title = "Throughput", .x_label = "step", .y_label = "tokens/s"},
                {Series(records, Member(&StepRecord::gen_tokens_per_s), "generation", kBlue),
                 Series(records, Member(&StepRecord::train_tokens_per_s), "training", kGreen)}));
  AddCard(&speed, StepTimeChart(records));
  if (!speed.empty())
    absl::StrAppend(&html, "<h2>Speed</h2><div class=\"grid\">", speed, "</div>\n");

  std::string staleness = StalenessCharts(records);
  if (!staleness.empty()) {
    absl::StrAppend(&html, "<h2>Staleness</h2><div class=\"grid\">", staleness, "</div>\n");
  }

  absl::StrAppend(&html, "<h2>Summary</h2>", SummaryTable(records, summary), "\n</body></html>\n");
  return html;
}

absl::StatusOr<std::string> WriteReport(const std::string& run_dir, const std::string& out_path) {
  absl::StatusOr<RunDir> run = RunDir::Open(run_dir);
  if (!run.ok()) return run.status();
  absl::StatusOr<std::vector<StepRecord>> records = ReadMetrics(run->metrics_path());
  if (!records.ok()) return records.status();
  absl::StatusOr<JobSummary> summary = ReadSummary(*run);
  if (!summary.ok() && !absl::IsNotFound(summary.status())) return summary.status();

  std::string title = std::filesystem::path(run->path()).filename().string();
  std::string html =
      RenderReportHtml(title, *records, summary.ok() ? std::optional(*summary) : std::nullopt);
  std::string path = out_path.empty() ? run->path() + "/report.html" : out_path;
  if (absl::Status status = WriteFileAtomically(path, html); !status.ok()) return status;
  return path;
}

}  // namespace lockstep::orchestrator
