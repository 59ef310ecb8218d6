#include "model/parity.h"

#include <algorithm>
#include <cmath>

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

absl::StatusOr<ParityReport> CompareLogProbs(const torch::Tensor& reference,
                                             const torch::Tensor& candidate,
                                             const std::vector<int64_t>& cu_seqlens) {
  if (reference.scalar_type() != torch::kFloat32 || candidate.scalar_type() != torch::kFloat32 ||
      reference.dim() != 1 || candidate.dim() != 1) {
    return absl::InvalidArgumentError("parity: log-probs must be float32 vectors");
  }
  const int64_t n = reference.size(0);
  if (candidate.size(0) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("parity: ", n, " reference log-probs but ", candidate.size(0), " candidate"));
  }
  if (cu_seqlens.empty() || cu_seqlens.front() != 0 || cu_seqlens.back() != n ||
      !std::is_sorted(cu_seqlens.begin(), cu_seqlens.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parity: cu_seqlens must rise from 0 to ", n));
  }
  torch::Tensor ref = reference.detach().contiguous();
  torch::Tensor cand = candidate.detach().contiguous();
  const int32_t* ref_bits = reinterpret_cast<const int32_t*>(ref.data_ptr<float>());
  const int32_t* cand_bits = reinterpret_cast<const int32_t*>(cand.data_ptr<float>());
  const float* ref_values = ref.data_ptr<float>();
  const float* cand_values = cand.data_ptr<float>();

  ParityReport report;
  report.tokens_compared = n;
  double sum_diff = 0, sum_abs = 0, sum_k3 = 0;
  int64_t finite = 0;
  size_t sequence = 0;
  for (int64_t i = 0; i < n; ++i) {
    while (cu_seqlens[sequence + 1] <= i) ++sequence;
    if (ref_bits[i] != cand_bits[i]) {
      ++report.tokens_differing;
      if (!report.first_difference) {
        report.first_difference = {static_cast<int64_t>(sequence), i - cu_seqlens[sequence]};
      }
    }
    const double d = static_cast<double>(cand_values[i]) - ref_values[i];
    if (!std::isfinite(d)) continue;
    const double r = -d;  // log p_ref - log p_cand
    ++finite;
    sum_diff += d;
    sum_abs += std::abs(d);
    sum_k3 += std::expm1(r) - r;
    report.max_abs_diff = std::max(report.max_abs_diff, std::abs(d));
  }
  if (finite > 0) {
    report.mean_diff = sum_diff / finite;
    report.mean_abs_diff = sum_abs / finite;
    report.k3_kl = sum_k3 / finite;
  }
  return report;
}

}  // namespace lockstep
