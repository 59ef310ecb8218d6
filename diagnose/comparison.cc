#include "diagnose/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "model/parity.h"

namespace lockstep::diagnose {
namespace {

using SlotKey = std::pair<int64_t, int>;

// Per capture row: -1 not compared (missing on a side), 0 identical, 1 different.
struct RowFlags {
  std::vector<int8_t> flags;
  std::vector<double> max_abs;  // per row
};

RowFlags CompareSlot(const OpCapture::Slot& a, const OpCapture::Slot& b) {
  const int64_t rows = a.values.size(0);
  RowFlags out{std::vector<int8_t>(rows, -1), std::vector<double>(rows, 0.0)};
  const torch::Tensor both = torch::logical_and(a.filled, b.filled);
  const torch::Tensor index = torch::nonzero(both).view({-1});
  if (index.numel() == 0) return out;
  const torch::Tensor av = a.values.index_select(0, index);
  const torch::Tensor bv = b.values.index_select(0, index);
  const torch::Tensor differs =
      torch::ne(av.view(torch::kInt32), bv.view(torch::kInt32)).any(1).contiguous();
  torch::Tensor delta = (av.to(torch::kFloat64) - bv.to(torch::kFloat64)).abs();
  delta = torch::where(torch::isnan(delta), torch::zeros_like(delta), delta);
  const torch::Tensor row_max = std::get<0>(delta.max(1)).contiguous();
  const int64_t* rows_index = index.data_ptr<int64_t>();
  const bool* differs_data = differs.data_ptr<bool>();
  const double* max_data = row_max.data_ptr<double>();
  for (int64_t i = 0; i < index.numel(); ++i) {
    out.flags[rows_index[i]] = differs_data[i] ? 1 : 0;
    out.max_abs[rows_index[i]] = max_data[i];
  }
  return out;
}

std::string InputName(const OpInput& input) {
  std::string name = OpSiteName(input.layer, input.op);
  if (input.all_earlier_positions) absl::StrAppend(&name, " (positions 0..t)");
  return name;
}

}  // namespace

std::vector<OpInput> InputsOf(int64_t layer, Op op, int64_t num_layers, bool has_qk_norm) {
  const OpInput residual_in =
      layer == 0 ? OpInput{-1, Op::kEmbedding} : OpInput{layer - 1, Op::kMlpResidual};
  switch (op) {
    case Op::kEmbedding:
      return {};
    case Op::kInputNorm:
      return {residual_in};
    case Op::kQProj:
    case Op::kKProj:
    case Op::kVProj:
      return {{layer, Op::kInputNorm}};
    case Op::kQNorm:
      return {{layer, Op::kQProj}};
    case Op::kKNorm:
      return {{layer, Op::kKProj}};
    case Op::kRopeQ:
      return {{layer, has_qk_norm ? Op::kQNorm : Op::kQProj}};
    case Op::kRopeK:
      return {{layer, has_qk_norm ? Op::kKNorm : Op::kKProj}};
    case Op::kAttention:
      return {{layer, Op::kRopeQ}, {layer, Op::kRopeK, true}, {layer, Op::kVProj, true}};
    case Op::kOProj:
      return {{layer, Op::kAttention}};
    case Op::kAttentionResidual:
      return {residual_in, {layer, Op::kOProj}};
    case Op::kPostAttentionNorm:
      return {{layer, Op::kAttentionResidual}};
    case Op::kGateProj:
    case Op::kUpProj:
      return {{layer, Op::kPostAttentionNorm}};
    case Op::kSiluMul:
      return {{layer, Op::kGateProj}, {layer, Op::kUpProj}};
    case Op::kDownProj:
      return {{layer, Op::kSiluMul}};
    case Op::kRouterLogits:
      return {{layer, Op::kPostAttentionNorm}};
    case Op::kMoe:
      return {{layer, Op::kPostAttentionNorm}, {layer, Op::kRouterLogits}};
    case Op::kMlpResidual:
      return {{layer, Op::kAttentionResidual}, {layer, Op::kDownProj}};
    case Op::kFinalNorm:
      return {{num_layers - 1, Op::kMlpResidual}};
    case Op::kLmHead:
      return {{-1, Op::kFinalNorm}};
    case Op::kLogSoftmax:
      return {{-1, Op::kLmHead}};
  }
  return {};
}

std::vector<std::pair<int64_t, Op>> ExecutionOrder(int64_t num_layers, bool has_qk_norm) {
  std::vector<std::pair<int64_t, Op>> order = {{-1, Op::kEmbedding}};
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    for (int op = static_cast<int>(Op::kInputNorm); op <= static_cast<int>(Op::kMlpResidual);
         ++op) {
      const Op o = static_cast<Op>(op);
      if (!has_qk_norm && (o == Op::kQNorm || o == Op::kKNorm)) continue;
      order.emplace_back(layer, o);
    }
  }
  order.emplace_back(-1, Op::kFinalNorm);
  order.emplace_back(-1, Op::kLmHead);
  order.emplace_back(-1, Op::kLogSoftmax);
  return order;
}

Comparison::Comparison(int64_t num_layers, bool has_qk_norm, int64_t top_k)
    : num_layers_(num_layers),
      has_qk_norm_(has_qk_norm),
      top_k_(top_k),
      order_(ExecutionOrder(num_layers, has_qk_norm)) {}

void Comparison::Consider(Candidate candidate, std::optional<Candidate>& best) {
  const auto key = [](const Candidate& c) {
    return std::make_tuple(c.rank, c.sequence, c.position);
  };
  if (!best || key(candidate) < key(*best)) best = std::move(candidate);
}

void Comparison::AddGroup(const std::vector<DiagnoseSequence>& sequences, int64_t first_index,
                          const PathRun& a, const PathRun& b) {
  has_ops_ = true;
  const OpCapture& ca = *a.capture;
  const OpCapture& cb = *b.capture;
  std::map<SlotKey, RowFlags> flags;
  for (const auto& [layer, op] : order_) {
    const OpCapture::Slot* sa = ca.Find(layer, op);
    const OpCapture::Slot* sb = cb.Find(layer, op);
    if (sa == nullptr || sb == nullptr) continue;
    RowFlags compared = CompareSlot(*sa, *sb);
    OpDifference& summary = ops_[{layer, static_cast<int>(op)}];
    summary.layer = layer;
    summary.op = op;
    for (size_t r = 0; r < compared.flags.size(); ++r) {
      if (compared.flags[r] < 0) continue;
      ++summary.rows_compared;
      summary.rows_differing += compared.flags[r];
      summary.max_abs_diff = std::max(summary.max_abs_diff, compared.max_abs[r]);
    }
    flags[{layer, static_cast<int>(op)}] = std::move(compared);
  }

  // Whether input `in` was identical for (sequence s, position p).
  const auto input_identical = [&](const OpInput& in, int64_t s, int64_t p) {
    auto it = flags.find({in.layer, static_cast<int>(in.op)});
    if (it == flags.end()) return false;
    const int64_t begin = in.all_earlier_positions ? 0 : p;
    for (int64_t q = begin; q <= p; ++q) {
      if (it->second.flags[ca.Row(s, q)] != 0) return false;
    }
    return true;
  };

  std::vector<std::optional<int64_t>> first_position(sequences.size());
  for (size_t rank = 0; rank < order_.size(); ++rank) {
    const auto [layer, op] = order_[rank];
    auto it = flags.find({layer, static_cast<int>(op)});
    if (it == flags.end()) continue;
    const std::vector<OpInput> inputs = InputsOf(layer, op, num_layers_, has_qk_norm_);
    for (int64_t s = 0; s < static_cast<int64_t>(sequences.size()); ++s) {
      const int64_t positions = static_cast<int64_t>(sequences[s].tokens.size()) - 1;
      for (int64_t p = 0; p < positions; ++p) {
        const int64_t row = ca.Row(s, p);
        if (it->second.flags[row] != 1) continue;
        if (!first_position[s] || p < *first_position[s]) first_position[s] = p;
        Divergence divergence;
        divergence.sequence = first_index + s;
        divergence.position = p;
        divergence.layer = layer;
        divergence.op = op;
        divergence.max_abs_diff = it->second.max_abs[row];
        bool clean = true;
        for (const OpInput& in : inputs) {
          divergence.inputs.push_back(InputName(in));
          clean = clean && input_identical(in, s, p);
        }
        divergence.inputs_identical = clean;
        Candidate candidate{static_cast<int64_t>(rank), first_index + s, p, divergence};
        Consider(candidate, clean ? first_ : first_without_clean_inputs_);
      }
    }
  }

  // The vocabulary at every predicting position.
  const OpCapture::Slot* la = ca.Find(-1, Op::kLogSoftmax);
  const OpCapture::Slot* lb = cb.Find(-1, Op::kLogSoftmax);
  const OpCapture::Slot* ha = ca.Find(-1, Op::kLmHead);
  const OpCapture::Slot* hb = cb.Find(-1, Op::kLmHead);
  if (la && lb && ha && hb) {
    torch::NoGradGuard no_grad;
    const torch::Tensor index =
        torch::nonzero(torch::logical_and(la->filled, lb->filled)).view({-1});
    if (index.numel() > 0) {
      // Each side's float32 log-probs, renormalised in float64 (their exp sums to 1 only up to
      // float32 rounding, which would let the KL of near-equal rows come out below 0).
      torch::Tensor pa = la->values.index_select(0, index).to(torch::kFloat64);
      torch::Tensor pb = lb->values.index_select(0, index).to(torch::kFloat64);
      pa = pa - torch::logsumexp(pa, {1}, /*keepdim=*/true);
      pb = pb - torch::logsumexp(pb, {1}, /*keepdim=*/true);
      // KL(A || B) = sum_v p_A(v) (log p_A(v) - log p_B(v)); terms with p_A = 0 add nothing.
      // What float64 rounding leaves below 0 is 0.
      torch::Tensor terms = pa.exp() * (pa - pb);
      terms = torch::where(torch::isneginf(pa), torch::zeros_like(terms), terms);
      const torch::Tensor kl = terms.sum(1).clamp_min(0.0);
      kl_sum_ += kl.sum().item<double>();
      kl_max_ = std::max(kl_max_, kl.max().item<double>());
      const torch::Tensor xa = ha->values.index_select(0, index);
      const torch::Tensor xb = hb->values.index_select(0, index);
      torch::Tensor logit_delta = (xa.to(torch::kFloat64) - xb.to(torch::kFloat64)).abs();
      logit_delta = torch::where(torch::isnan(logit_delta), torch::zeros_like(logit_delta),
                                 logit_delta);
      logit_max_ = std::max(logit_max_, logit_delta.max().item<double>());
      top1_same_ += torch::eq(xa.argmax(1), xb.argmax(1)).sum().item<int64_t>();
      const int64_t k = std::min<int64_t>(top_k_, xa.size(1));
      const torch::Tensor ta = std::get<1>(xa.topk(k, 1)).contiguous();
      const torch::Tensor tb = std::get<1>(xb.topk(k, 1)).contiguous();
      for (int64_t r = 0; r < ta.size(0); ++r) {
        std::set<int64_t> in_b(tb[r].data_ptr<int64_t>(), tb[r].data_ptr<int64_t>() + k);
        int64_t shared = 0;
        for (int64_t j = 0; j < k; ++j) shared += in_b.count(ta[r][j].item<int64_t>());
        topk_sum_ += static_cast<double>(shared) / static_cast<double>(k);
      }
      vocab_positions_ += index.numel();
    }
  }

  for (size_t s = 0; s < sequences.size(); ++s) {
    SequenceResult result;
    result.index = first_index + static_cast<int64_t>(s);
    result.num_tokens = static_cast<int64_t>(sequences[s].tokens.size());
    result.prompt_length = sequences[s].prompt_length;
    result.first_differing_position = first_position[s];
    result.logprobs_a = a.logprobs[s];
    result.logprobs_b = b.logprobs[s];
    sequences_.push_back(std::move(result));
  }
}

void Comparison::AddTokensOnly(const DiagnoseSequence& sequence, int64_t index,
                               std::vector<float> a, std::vector<float> b) {
  SequenceResult result;
  result.index = index;
  result.num_tokens = static_cast<int64_t>(sequence.tokens.size());
  result.prompt_length = sequence.prompt_length;
  result.logprobs_a = std::move(a);
  result.logprobs_b = std::move(b);
  sequences_.push_back(std::move(result));
}

absl::StatusOr<DiagnoseReport> Comparison::Finish() {
  DiagnoseReport report;
  report.has_ops = has_ops_;
  std::vector<float> all_a, all_b;
  std::vector<int64_t> cu = {0};
  for (SequenceResult& result : sequences_) {
    if (result.logprobs_a.size() != result.logprobs_b.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", result.index, ": ", result.logprobs_a.size(), " log-probs on path A but ",
          result.logprobs_b.size(), " on path B"));
    }
    ParityAccumulator tokens;
    for (size_t j = 0; j < result.logprobs_a.size(); ++j) {
      tokens.Add(result.index, static_cast<int64_t>(j), result.logprobs_a[j], result.logprobs_b[j]);
    }
    const ParityReport sequence_parity = tokens.Finish();
    result.tokens_differing = sequence_parity.tokens_differing;
    result.max_abs_logprob_diff = sequence_parity.max_abs_diff;
    all_a.insert(all_a.end(), result.logprobs_a.begin(), result.logprobs_a.end());
    all_b.insert(all_b.end(), result.logprobs_b.begin(), result.logprobs_b.end());
    cu.push_back(static_cast<int64_t>(all_a.size()));
  }
  absl::StatusOr<ParityReport> parity =
      CompareLogProbs(torch::tensor(all_a, torch::kFloat32), torch::tensor(all_b, torch::kFloat32),
                      cu);
  if (!parity.ok()) return parity.status();
  report.tokens_compared = parity->tokens_compared;
  report.tokens_differing = parity->tokens_differing;
  report.max_abs_logprob_diff = parity->max_abs_diff;
  report.mean_abs_logprob_diff = parity->mean_abs_diff;
  report.k3 = parity->k3_kl;

  if (vocab_positions_ > 0) {
    report.vocab.positions = vocab_positions_;
    report.vocab.max_kl = kl_max_;
    report.vocab.mean_kl = kl_sum_ / static_cast<double>(vocab_positions_);
    report.vocab.max_abs_logit_diff = logit_max_;
    report.vocab.top1_agreement =
        static_cast<double>(top1_same_) / static_cast<double>(vocab_positions_);
    report.vocab.topk_agreement = topk_sum_ / static_cast<double>(vocab_positions_);
  }
  report.vocab.k = top_k_;
  bool ops_identical = true;
  for (const auto& [layer, op] : order_) {
    auto it = ops_.find({layer, static_cast<int>(op)});
    if (it == ops_.end()) continue;
    report.ops.push_back(it->second);
    ops_identical = ops_identical && it->second.rows_differing == 0;
  }
  if (first_) {
    report.first_divergence = first_->divergence;
  } else if (first_without_clean_inputs_) {
    report.first_divergence = first_without_clean_inputs_->divergence;
  }
  report.identical = report.tokens_differing == 0 && ops_identical;
  report.sequences = std::move(sequences_);
  return report;
}

}  // namespace lockstep::diagnose
