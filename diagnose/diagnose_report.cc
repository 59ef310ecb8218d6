#include "diagnose/diagnose_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::diagnose {
namespace {

// JSON has no infinity: non-finite figures are written as null.
nlohmann::json Number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

std::string OpSiteName(int64_t layer, Op op) {
  return layer < 0 ? std::string(OpName(op)) : absl::StrCat("layer ", layer, " ", OpName(op));
}

nlohmann::json ReportToJson(const DiagnoseReport& report) {
  nlohmann::json out;
  out["a"] = report.a_settings;
  out["b"] = report.b_settings;
  out["identical"] = report.identical;
  out["tokens_compared"] = report.tokens_compared;
  out["tokens_differing"] = report.tokens_differing;
  out["max_abs_logprob_diff"] = Number(report.max_abs_logprob_diff);
  out["mean_abs_logprob_diff"] = Number(report.mean_abs_logprob_diff);
  out["k3"] = Number(report.k3);
  if (report.has_ops) {
    out["vocab"] = {{"positions", report.vocab.positions},
                    {"max_kl", Number(report.vocab.max_kl)},
                    {"mean_kl", Number(report.vocab.mean_kl)},
                    {"max_abs_logit_diff", Number(report.vocab.max_abs_logit_diff)},
                    {"top1_agreement", report.vocab.top1_agreement},
                    {"topk_agreement", report.vocab.topk_agreement},
                    {"k", report.vocab.k}};
  } else {
    out["vocab"] = nullptr;
  }
  if (report.first_divergence) {
    const Divergence& d = *report.first_divergence;
    out["first_divergence"] = {{"sequence", d.sequence},
                               {"position", d.position},
                               {"layer", d.layer},
                               {"op", std::string(OpName(d.op))},
                               {"max_abs_diff", Number(d.max_abs_diff)},
                               {"inputs", d.inputs},
                               {"inputs_identical", d.inputs_identical}};
  } else {
    out["first_divergence"] = nullptr;
  }
  out["ops"] = nlohmann::json::array();
  for (const OpDifference& op : report.ops) {
    out["ops"].push_back({{"layer", op.layer},
                          {"op", std::string(OpName(op.op))},
                          {"max_abs_diff", Number(op.max_abs_diff)},
                          {"rows_compared", op.rows_compared},
                          {"rows_differing", op.rows_differing}});
  }
  out["sequences"] = nlohmann::json::array();
  for (const SequenceResult& s : report.sequences) {
    nlohmann::json item = {{"index", s.index},
                           {"num_tokens", s.num_tokens},
                           {"prompt_length", s.prompt_length},
                           {"tokens_differing", s.tokens_differing},
                           {"max_abs_logprob_diff", Number(s.max_abs_logprob_diff)},
                           {"logprobs_a", s.logprobs_a},
                           {"logprobs_b", s.logprobs_b}};
    item["first_differing_position"] = s.first_differing_position
                                           ? nlohmann::json(*s.first_differing_position)
                                           : nlohmann::json(nullptr);
    out["sequences"].push_back(std::move(item));
  }
  if (report.replay) {
    out["replay"] = {{"records", report.replay->records},
                     {"tokens_compared", report.replay->tokens_compared},
                     {"tokens_differing", report.replay->tokens_differing},
                     {"max_abs_diff", Number(report.replay->max_abs_diff)},
                     {"reproduced", report.replay->reproduced()}};
  }
  out["seconds"] = {{"a", report.seconds_a}, {"b", report.seconds_b}};
  out["capture_bytes_peak"] = report.capture_bytes_peak;
  return out;
}

std::string ReportToText(const DiagnoseReport& report) {
  std::string text = absl::StrCat("A: ", report.a_settings, "\nB: ", report.b_settings, "\n");
  if (report.replay) {
    const ReplayCheck& r = *report.replay;
    absl::StrAppendFormat(&text,
                          "replay of %d recorded rollouts: %d of %d generator log-probs %s "
                          "(max |d| %.3g)\n",
                          r.records, r.tokens_compared - r.tokens_differing, r.tokens_compared,
                          r.reproduced() ? "reproduced bit for bit" : "reproduced",
                          r.max_abs_diff);
  }
  absl::StrAppendFormat(&text,
                        "sampled tokens: %d compared, %d not bit-identical, max |dlogprob| %.3g, "
                        "mean %.3g, k3 %.3g\n",
                        report.tokens_compared, report.tokens_differing,
                        report.max_abs_logprob_diff, report.mean_abs_logprob_diff, report.k3);
  if (report.has_ops) {
    const VocabStats& v = report.vocab;
    absl::StrAppendFormat(&text,
                          "vocabulary (%d positions): KL(A||B) max %.3g mean %.3g, max |dlogit| "
                          "%.3g, top-1 agreement %.4f, top-%d agreement %.4f\n",
                          v.positions, v.max_kl, v.mean_kl, v.max_abs_logit_diff,
                          v.top1_agreement, v.k, v.topk_agreement);
  }
  if (report.first_divergence) {
    const Divergence& d = *report.first_divergence;
    absl::StrAppendFormat(&text, "first divergence: sequence %d, position %d, %s (|d| %.3g)\n",
                          d.sequence, d.position, OpSiteName(d.layer, d.op), d.max_abs_diff);
    if (d.inputs_identical) {
      absl::StrAppend(&text, "  its inputs were bit-identical on both paths:");
      for (const std::string& input : d.inputs) absl::StrAppend(&text, " [", input, "]");
      absl::StrAppend(&text, d.inputs.empty() ? " (it reads only token ids)\n" : "\n");
    } else {
      absl::StrAppend(&text,
                      "  no op had identical inputs: the difference entered outside the ops "
                      "diagnose sees (weights, cache, token ids?)\n");
    }
  } else if (report.has_ops) {
    absl::StrAppend(&text, "first divergence: none\n");
  }
  if (report.has_ops) {
    int64_t differing = 0;
    for (const OpDifference& op : report.ops) differing += op.rows_differing > 0;
    absl::StrAppendFormat(&text, "ops: %d of %d layer x op outputs differ\n", differing,
                          report.ops.size());
    if (differing > 0) {
      absl::StrAppendFormat(&text, "  %-28s %12s %14s\n", "op", "rows differ", "max |d|");
      int shown = 0;
      for (const OpDifference& op : report.ops) {
        if (op.rows_differing == 0) continue;
        if (++shown > 24) {
          absl::StrAppend(&text, "  ... (the whole table is in --json / --html)\n");
          break;
        }
        absl::StrAppendFormat(&text, "  %-28s %5d/%-6d %14.3g\n", OpSiteName(op.layer, op.op),
                              op.rows_differing, op.rows_compared, op.max_abs_diff);
      }
    }
  }
  for (const SequenceResult& s : report.sequences) {
    std::string first = s.first_differing_position
                            ? absl::StrCat(", ops differ from position ",
                                           *s.first_differing_position)
                            : "";
    absl::StrAppendFormat(&text, "sequence %d: %d tokens (prompt %d), %d of %d log-probs differ%s\n",
                          s.index, s.num_tokens, s.prompt_length, s.tokens_differing,
                          s.logprobs_a.size(), first);
  }
  absl::StrAppend(&text, report.identical ? "verdict: identical in every bit\n"
                                          : "verdict: A and B differ\n");
  return text;
}

}  // namespace lockstep::diagnose
