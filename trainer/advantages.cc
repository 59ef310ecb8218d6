#include "trainer/advantages.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::trainer {

absl::StatusOr<AdvantageKind> ParseAdvantageKind(absl::string_view name) {
  if (name == "grpo") return AdvantageKind::kGrpo;
  if (name == "dr_grpo") return AdvantageKind::kDrGrpo;
  if (name == "rloo") return AdvantageKind::kRloo;
  return absl::InvalidArgumentError(
      absl::StrCat("advantage kind '", name, "' is not known (grpo, dr_grpo, rloo)"));
}

absl::string_view AdvantageKindName(AdvantageKind kind) {
  switch (kind) {
    case AdvantageKind::kGrpo:
      return "grpo";
    case AdvantageKind::kDrGrpo:
      return "dr_grpo";
    case AdvantageKind::kRloo:
      return "rloo";
  }
  return "unknown";
}

absl::StatusOr<std::vector<double>> GroupAdvantages(const std::vector<double>& rewards,
                                                    const AdvantageOptions& options) {
  if (rewards.empty()) return absl::InvalidArgumentError("advantages: empty reward group");
  if (!(options.std_eps >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("advantages: std_eps must be >= 0, got ", options.std_eps));
  }
  for (size_t i = 0; i < rewards.size(); ++i) {
    if (!std::isfinite(rewards[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("advantages: reward ", i, " is not finite (", rewards[i], ")"));
    }
  }
  const double n = static_cast<double>(rewards.size());
  // mean = (1/n) sum_i r_i
  double sum = 0;
  for (double r : rewards) sum += r;
  const double mean = sum / n;
  bool all_equal = true;
  for (double r : rewards) all_equal = all_equal && r == rewards[0];
  if (all_equal && options.drop_zero_variance_groups) return std::vector<double>{};
  std::vector<double> advantages(rewards.size(), 0.0);
  if (rewards.size() == 1) return advantages;

  switch (options.kind) {
    case AdvantageKind::kDrGrpo:
      // A_i = r_i - mean
      for (size_t i = 0; i < rewards.size(); ++i) advantages[i] = rewards[i] - mean;
      break;
    case AdvantageKind::kGrpo: {
      // std = sqrt( sum_i (r_i - mean)^2 / (n - 1) )   (unbiased, as torch.std)
      // A_i = (r_i - mean) / (std + eps)
      double squares = 0;
      for (double r : rewards) squares += (r - mean) * (r - mean);
      const double std_dev = std::sqrt(squares / (n - 1));
      for (size_t i = 0; i < rewards.size(); ++i) {
        advantages[i] = (rewards[i] - mean) / (std_dev + options.std_eps);
      }
      break;
    }
    case AdvantageKind::kRloo:
      // A_i = r_i - (sum_j r_j - r_i) / (n - 1)
      for (size_t i = 0; i < rewards.size(); ++i) {
        advantages[i] = rewards[i] - (sum - rewards[i]) / (n - 1);
      }
      break;
  }
  return advantages;
}

}  // namespace lockstep::trainer
