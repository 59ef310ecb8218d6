#include "diagnose/report_html.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace lockstep::diagnose {
namespace {

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// White for 0 (identical), then yellow to dark red over log10 |Δ| from 1e-9 to 1.
std::string HeatColor(double max_abs, bool differs) {
  if (!differs) return "#f4f9f4";
  const double t = std::clamp((std::log10(std::max(max_abs, 1e-12)) + 9.0) / 9.0, 0.0, 1.0);
  const int red = 255 - static_cast<int>(90 * t);
  const int green = static_cast<int>(220 * (1 - t));
  const int blue = static_cast<int>(80 * (1 - t));
  return absl::StrFormat("#%02x%02x%02x", red, green, blue);
}

std::string HeatMap(const DiagnoseReport& report) {
  std::vector<Op> layer_ops;
  std::map<int64_t, std::map<int, const OpDifference*>> by_layer;
  for (const OpDifference& op : report.ops) {
    if (IsLayerOp(op.op) &&
        std::find(layer_ops.begin(), layer_ops.end(), op.op) == layer_ops.end()) {
      layer_ops.push_back(op.op);
    }
    by_layer[op.layer][static_cast<int>(op.op)] = &op;
  }
  const auto cell = [](const OpDifference* op) {
    if (op == nullptr) return std::string("<td class=na></td>");
    const bool differs = op->rows_differing > 0;
    return absl::StrFormat(
        "<td style=\"background:%s\" title=\"%d of %d rows differ, max |d| %.3g\">%s</td>",
        HeatColor(op->max_abs_diff, differs), op->rows_differing, op->rows_compared,
        op->max_abs_diff, differs ? absl::StrFormat("%.1e", op->max_abs_diff) : "0");
  };
  // One row per op in execution order, one column per layer: a tall map that fits the page at
  // any depth (wider than the page, it scrolls inside its own box).
  std::string html = "<div class=scroll><table class=heat><tr><th>op \\ layer</th>";
  for (const auto& [layer, ops] : by_layer) {
    if (layer >= 0) absl::StrAppend(&html, "<th>", layer, "</th>");
  }
  absl::StrAppend(&html, "</tr>");
  for (Op op : layer_ops) {
    absl::StrAppend(&html, "<tr><th>", OpName(op), "</th>");
    for (const auto& [layer, ops] : by_layer) {
      if (layer < 0) continue;
      auto it = ops.find(static_cast<int>(op));
      absl::StrAppend(&html, cell(it == ops.end() ? nullptr : it->second));
    }
    absl::StrAppend(&html, "</tr>");
  }
  absl::StrAppend(&html, "</table></div><table class=heat><tr>");
  const auto& outside = by_layer[-1];
  for (const auto& [op, difference] : outside) {
    absl::StrAppend(&html, "<th>", OpName(static_cast<Op>(op)), "</th>");
  }
  absl::StrAppend(&html, "</tr><tr>");
  for (const auto& [op, difference] : outside) absl::StrAppend(&html, cell(difference));
  absl::StrAppend(&html, "</tr></table>");
  return html;
}

// One bar per completion token: |logprob_A - logprob_B| on a log scale; grey when identical.
std::string SequenceBars(const SequenceResult& s) {
  const int64_t n = static_cast<int64_t>(s.logprobs_a.size());
  const int width = 640, height = 60;
  const double bar = n > 0 ? static_cast<double>(width) / n : width;
  std::string svg = absl::StrFormat(
      "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=img>"
      "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>",
      width, height, width, height, width, height);
  for (int64_t j = 0; j < n; ++j) {
    const double d = std::abs(static_cast<double>(s.logprobs_a[j]) - s.logprobs_b[j]);
    const bool same = s.logprobs_a[j] == s.logprobs_b[j] ||
                      (std::isnan(s.logprobs_a[j]) && std::isnan(s.logprobs_b[j]));
    const double t = same ? 0.05 : std::clamp((std::log10(std::max(d, 1e-12)) + 9.0) / 9.0, 0.1, 1.0);
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                          "fill=\"%s\"><title>token %d: A %.7g B %.7g</title></rect>",
                          j * bar, height * (1 - t), std::max(bar - 1, 1.0), height * t,
                          same ? "#9bbf9b" : "#c0392b", s.prompt_length + j, s.logprobs_a[j],
                          s.logprobs_b[j]);
  }
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

}  // namespace

std::string ReportToHtml(const DiagnoseReport& report) {
  std::string html =
      "<!DOCTYPE html><html><head><meta charset=utf-8><title>lockstep diagnose</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
      "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
      ".verdict{font-size:20px;padding:10px 14px;border-radius:6px;display:inline-block}"
      ".same{background:#dff0d8}.differ{background:#f8d7da}"
      "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;"
      "font-size:12px;text-align:right}th{background:#eee}"
      ".heat td{min-width:54px;font-family:monospace}.heat th{text-align:left}"
      ".na{background:#fff}.scroll{overflow-x:auto;max-width:100%}"
      ".box{border-left:4px solid #c0392b;padding:6px 12px;background:#fdf2f2}"
      "</style></head><body><h1>lockstep diagnose</h1>";
  absl::StrAppend(&html, "<p>A: <code>", Escape(report.a_settings), "</code><br>B: <code>",
                  Escape(report.b_settings), "</code></p>");
  absl::StrAppend(&html, "<div class=\"verdict ", report.identical ? "same" : "differ", "\">",
                  report.identical ? "identical in every bit" : "A and B differ", "</div>");
  if (report.replay) {
    absl::StrAppendFormat(&html,
                          "<p>Replay of %d recorded rollouts: %d of %d generator log-probs "
                          "reproduced bit for bit.</p>",
                          report.replay->records,
                          report.replay->tokens_compared - report.replay->tokens_differing,
                          report.replay->tokens_compared);
  }
  absl::StrAppend(&html, "<h2>Sampled tokens</h2><table>");
  absl::StrAppendFormat(&html,
                        "<tr><th>compared</th><th>not bit-identical</th><th>max |&Delta;logprob|"
                        "</th><th>mean |&Delta;logprob|</th><th>k3</th></tr><tr><td>%d</td>"
                        "<td>%d</td><td>%.3g</td><td>%.3g</td><td>%.3g</td></tr></table>",
                        report.tokens_compared, report.tokens_differing,
                        report.max_abs_logprob_diff, report.mean_abs_logprob_diff, report.k3);
  if (report.has_ops) {
    const VocabStats& v = report.vocab;
    absl::StrAppendFormat(
        &html,
        "<h2>Whole vocabulary</h2><table><tr><th>positions</th><th>max KL(A&#8214;B)</th>"
        "<th>mean KL</th><th>max |&Delta;logit|</th><th>top-1 agreement</th><th>top-%d "
        "agreement</th></tr><tr><td>%d</td><td>%.3g</td><td>%.3g</td><td>%.3g</td><td>%.4f</td>"
        "<td>%.4f</td></tr></table>",
        v.k, v.positions, v.max_kl, v.mean_kl, v.max_abs_logit_diff, v.top1_agreement,
        v.topk_agreement);
    absl::StrAppend(&html, "<h2>First divergence</h2>");
    if (report.first_divergence) {
      const Divergence& d = *report.first_divergence;
      const std::string where = OpSiteName(d.layer, d.op);
      absl::StrAppendFormat(&html,
                            "<div class=box><b>%s</b> at sequence %d, position %d (max |&Delta;| "
                            "%.3g).<br>",
                            Escape(where), d.sequence, d.position, d.max_abs_diff);
      if (d.inputs_identical) {
        absl::StrAppend(&html, "Its inputs were bit-identical on both paths: ");
        absl::StrAppend(&html, absl::StrJoin(d.inputs, "; ",
                                             [](std::string* out, const std::string& input) {
                                               out->append(Escape(input));
                                             }),
                        d.inputs.empty() ? "it reads only token ids." : ".");
      } else {
        absl::StrAppend(&html, "No op had identical inputs: the difference entered outside the "
                               "ops diagnose observes.");
      }
      absl::StrAppend(&html, "</div>");
    } else {
      absl::StrAppend(&html, "<p>None: every op output is bit-identical.</p>");
    }
    absl::StrAppend(&html, "<h2>Max |&Delta;| per layer &times; op</h2>", HeatMap(report));
  }
  absl::StrAppend(&html, "<h2>Sequences</h2>");
  for (const SequenceResult& s : report.sequences) {
    absl::StrAppendFormat(&html,
                          "<p>Sequence %d: %d tokens (prompt %d), %d of %d log-probs differ, "
                          "max |&Delta;| %.3g%s</p>",
                          s.index, s.num_tokens, s.prompt_length, s.tokens_differing,
                          s.logprobs_a.size(), s.max_abs_logprob_diff,
                          s.first_differing_position
                              ? absl::StrCat("; ops differ from position ",
                                             *s.first_differing_position)
                              : "");
    absl::StrAppend(&html, SequenceBars(s));
  }
  absl::StrAppend(&html, "</body></html>\n");
  return html;
}

}  // namespace lockstep::diagnose
