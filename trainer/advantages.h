// Group-relative advantages for policy-gradient training (GRPO, Dr. GRPO, RLOO).
//
// A group is the rewards of the n samples of one prompt; the caller leaves failed items out.
// Plain C++ with no LibTorch, so that the orchestrator can compute advantages without linking
// the model. Thread safety: pure functions.
#ifndef LOCKSTEP_TRAINER_ADVANTAGES_H_
#define LOCKSTEP_TRAINER_ADVANTAGES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::trainer {

enum class AdvantageKind {
  kGrpo,    // (r_i - mean) / (std + eps)
  kDrGrpo,  // r_i - mean
  kRloo,    // r_i - mean_{j != i} r_j
};

// "grpo" | "dr_grpo" | "rloo"; InvalidArgument otherwise.
absl::StatusOr<AdvantageKind> ParseAdvantageKind(absl::string_view name);
absl::string_view AdvantageKindName(AdvantageKind kind);

struct AdvantageOptions {
  AdvantageKind kind = AdvantageKind::kGrpo;
  // A group whose rewards are all equal carries no learning signal; when set, such a group
  // gets no advantages at all (an empty result) so that the caller can drop its samples.
  bool drop_zero_variance_groups = false;
  double std_eps = 1e-6;
};

// One advantage per reward, in order; an empty vector when the group is dropped (see
// drop_zero_variance_groups). A group of one sample has advantage 0 under every kind (there is
// no baseline to compare with). Errors: InvalidArgument for an empty group, a non-finite reward
// (naming its index) or a negative std_eps.
absl::StatusOr<std::vector<double>> GroupAdvantages(const std::vector<double>& rewards,
                                                    const AdvantageOptions& options);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_ADVANTAGES_H_
