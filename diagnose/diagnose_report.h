// What `lockstep diagnose` found, and its three renderings: a console table, the JSON contract
// (docs/diagnose.md lists the keys) and a self-contained HTML page.
#ifndef LOCKSTEP_DIAGNOSE_DIAGNOSE_REPORT_H_
#define LOCKSTEP_DIAGNOSE_DIAGNOSE_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/forward_observer.h"
#include "nlohmann/json.hpp"

namespace lockstep::diagnose {

// Per layer × op: how far path B's outputs are from path A's over the compared rows.
struct OpDifference {
  int64_t layer = -1;  // -1 outside the decoder layers
  Op op = Op::kEmbedding;
  int64_t rows_compared = 0;
  int64_t rows_differing = 0;  // not bit-identical
  double max_abs_diff = 0;
};

// The op that introduced the difference: its output differs while all its inputs (the outputs
// it reads: same position, and for attention the keys and values of positions 0..t) were
// bit-identical on both paths.
struct Divergence {
  int64_t sequence = 0;
  int64_t position = 0;
  int64_t layer = -1;
  Op op = Op::kEmbedding;
  double max_abs_diff = 0;          // of that row
  std::vector<std::string> inputs;  // "layer 2 rope_k (positions 0..t)", ...
  // False when no op had identical inputs (the difference entered through something the
  // observer does not see); the divergence is then the first differing op in execution order.
  bool inputs_identical = true;
};

struct VocabStats {
  int64_t positions = 0;  // rows with logits on both paths
  double max_kl = 0;      // KL(A || B) per position, over the whole vocabulary
  double mean_kl = 0;
  double max_abs_logit_diff = 0;
  double top1_agreement = 1;  // fraction of positions with the same argmax
  double topk_agreement = 1;  // mean |top-k(A) ∩ top-k(B)| / k
  int64_t k = 5;
};

struct SequenceResult {
  int64_t index = 0;
  int64_t num_tokens = 0;
  int64_t prompt_length = 0;
  int64_t tokens_differing = 0;
  double max_abs_logprob_diff = 0;
  // First position at which any op's output differs (op-level), if any.
  std::optional<int64_t> first_differing_position;
  std::vector<float> logprobs_a, logprobs_b;  // completion tokens
};

// `lockstep diagnose runs/<name>`: does this process's generator path give back the log-probs
// the run's generator recorded?
struct ReplayCheck {
  int64_t records = 0;
  int64_t tokens_compared = 0;
  int64_t tokens_differing = 0;
  double max_abs_diff = 0;
  bool reproduced() const { return tokens_differing == 0; }
};

struct DiagnoseReport {
  std::string a_settings, b_settings;  // PathSettings::ToString, or "behaviour FILE"
  bool identical = true;               // every compared bit equal
  int64_t tokens_compared = 0;
  int64_t tokens_differing = 0;
  double max_abs_logprob_diff = 0;
  double mean_abs_logprob_diff = 0;
  // k3 estimate of KL(B || A) from tokens B produced: mean(exp(r) - 1 - r), r = logp_A - logp_B.
  double k3 = 0;
  bool has_ops = true;  // false for --behaviour (no op outputs on the other side)
  VocabStats vocab;
  std::optional<Divergence> first_divergence;
  std::vector<OpDifference> ops;  // execution order
  std::vector<SequenceResult> sequences;
  std::optional<ReplayCheck> replay;
  double seconds_a = 0, seconds_b = 0;
  int64_t capture_bytes_peak = 0;
};

// "layer 3 q_proj", or the op's name alone for layer -1: how every report names an op site.
std::string OpSiteName(int64_t layer, Op op);

nlohmann::json ReportToJson(const DiagnoseReport& report);
// The console form: a summary, the first divergence, and the ops that differ.
std::string ReportToText(const DiagnoseReport& report);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_DIAGNOSE_REPORT_H_
