// Compares two path runs over the same sequences, group by group, into a DiagnoseReport:
// sampled-token log-probs (model/parity's CompareLogProbs: A is the reference, B the
// candidate), the whole vocabulary at every predicting position, the max |Δ| of every layer ×
// op, and the first divergence: walking ops in execution order (embedding, layer 0's ops in
// order, ..., final norm, LM head, log-softmax; within an op, by sequence then position), the
// first output that differs while every input it reads was bit-identical.
#ifndef LOCKSTEP_DIAGNOSE_COMPARISON_H_
#define LOCKSTEP_DIAGNOSE_COMPARISON_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "diagnose/diagnose_report.h"
#include "diagnose/execution_paths.h"

namespace lockstep::diagnose {

// An input of an op: the output of (layer, op) at the same position, or at every position
// 0..t of the same sequence (attention's keys and values).
struct OpInput {
  int64_t layer = -1;
  Op op = Op::kEmbedding;
  bool all_earlier_positions = false;
};

// The op outputs `op` of `layer` reads, in a model of `num_layers` layers (with or without
// Qwen3's q/k norms). Layer -1 for ops outside the layers.
std::vector<OpInput> InputsOf(int64_t layer, Op op, int64_t num_layers, bool has_qk_norm);

// Every (layer, op) in execution order.
std::vector<std::pair<int64_t, Op>> ExecutionOrder(int64_t num_layers, bool has_qk_norm);

class Comparison {
 public:
  Comparison(int64_t num_layers, bool has_qk_norm, int64_t top_k);

  // One group: sequences[i] has report index first_index + i; `a` and `b` ran them.
  void AddGroup(const std::vector<DiagnoseSequence>& sequences, int64_t first_index,
                const PathRun& a, const PathRun& b);

  // Token log-probs only (B from outside, e.g. --behaviour): no op or vocabulary data.
  void AddTokensOnly(const DiagnoseSequence& sequence, int64_t index, std::vector<float> a,
                     std::vector<float> b);

  // The report over every group added. InvalidArgument if the token log-prob lists do not
  // match in length.
  absl::StatusOr<DiagnoseReport> Finish();

 private:
  struct Candidate {
    int64_t rank, sequence, position;
    Divergence divergence;
  };
  void Consider(Candidate candidate, std::optional<Candidate>& best);

  int64_t num_layers_;
  bool has_qk_norm_;
  int64_t top_k_;
  std::vector<std::pair<int64_t, Op>> order_;
  std::map<std::pair<int64_t, int>, OpDifference> ops_;
  std::optional<Candidate> first_, first_without_clean_inputs_;
  std::vector<SequenceResult> sequences_;
  // Vocabulary sums.
  int64_t vocab_positions_ = 0, top1_same_ = 0;
  double kl_sum_ = 0, kl_max_ = 0, logit_max_ = 0, topk_sum_ = 0;
  bool has_ops_ = false;
};

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_COMPARISON_H_
