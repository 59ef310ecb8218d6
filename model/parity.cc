#include "model/parity.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {

std::string ParityReport::ToString() const {
  std::string first = "none";
  if (first_difference) {
    first = absl::StrCat("(sequence ", first_difference->first, ", position ",
                         first_difference->second, ")");
  }
  return absl::StrFormat(
      "parity: %d tokens compared, %d not bit-identical, first difference %s, max |d| %.3g, "
      "mean d %.3g, mean |d| %.3g, k3 KL %.3g",
      tokens_compared, tokens_differing, first, max_abs_diff, mean_diff, mean_abs_diff, k3_kl);
}

void ParityAccumulator::Add(int64_t sequence, int64_t position, float trainer, float generator) {
  ++report_.tokens_compared;
  if (std::memcmp(&trainer, &generator, sizeof(float)) != 0) {
    ++report_.tokens_differing;
    if (!report_.first_difference) {
      report_.first_difference = {sequence, position};
      report_.first_trainer_logprob = trainer;
      report_.first_generator_logprob = generator;
    }
    std::vector<int64_t>& seqs = report_.differing_sequences;
    if (seqs.empty() || seqs.back() != sequence) seqs.push_back(sequence);
  }
  const double d = static_cast<double>(trainer) - static_cast<double>(generator);
  if (!std::isfinite(d)) return;
  ++finite_;
  sum_diff_ += d;
  sum_abs_ += std::abs(d);
  sum_k3_ += std::expm1(d) - d;
  report_.max_abs_diff = std::max(report_.max_abs_diff, std::abs(d));
}

ParityReport ParityAccumulator::Finish() const {
  ParityReport report = report_;
  std::vector<int64_t>& seqs = report.differing_sequences;
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  if (finite_ > 0) {
    const double n = static_cast<double>(finite_);
    report.mean_diff = sum_diff_ / n;
    report.mean_abs_diff = sum_abs_ / n;
    report.k3_kl = sum_k3_ / n;
  }
  return report;
}

absl::StatusOr<ParityReport> CompareLogProbs(const torch::Tensor& trainer,
                                             const torch::Tensor& generator,
                                             const std::vector<int64_t>& cu_seqlens) {
  if (trainer.scalar_type() != torch::kFloat32 || generator.scalar_type() != torch::kFloat32 ||
      trainer.dim() != 1 || generator.dim() != 1) {
    return absl::InvalidArgumentError("parity: log-probs must be float32 vectors");
  }
  const int64_t n = trainer.size(0);
  if (generator.size(0) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("parity: ", n, " trainer log-probs but ", generator.size(0), " generator"));
  }
  if (cu_seqlens.empty() || cu_seqlens.front() != 0 || cu_seqlens.back() != n ||
      !std::is_sorted(cu_seqlens.begin(), cu_seqlens.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parity: cu_seqlens must rise from 0 to ", n));
  }
  torch::Tensor t = trainer.detach().contiguous();
  torch::Tensor g = generator.detach().contiguous();
  const float* t_values = t.data_ptr<float>();
  const float* g_values = g.data_ptr<float>();
  ParityAccumulator accumulator;
  size_t sequence = 0;
  for (int64_t i = 0; i < n; ++i) {
    while (cu_seqlens[sequence + 1] <= i) ++sequence;
    accumulator.Add(static_cast<int64_t>(sequence), i - cu_seqlens[sequence], t_values[i],
                    g_values[i]);
  }
  return accumulator.Finish();
}

}  // namespace lockstep
