// Exact match reward: 1 when the completion equals the reference answer after the chosen
// normalisations, else 0. Sub-score: none.
#ifndef LOCKSTEP_REWARDS_EXACT_MATCH_H_
#define LOCKSTEP_REWARDS_EXACT_MATCH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

struct ExactMatchOptions {
  // Compare ASCII letters case-insensitively.
  bool ignore_case = false;
  // Trim both ends and collapse each run of whitespace to one space.
  bool normalize_whitespace = true;
  // Remove ASCII punctuation everywhere (SQuAD-style answers: "Paris." matches "paris").
  bool strip_punctuation = false;
};

// Returns `text` with the options' normalisations applied.
std::string NormalizeForExactMatch(absl::string_view text, const ExactMatchOptions& options);

class ExactMatchReward final : public Reward {
 public:
  explicit ExactMatchReward(ExactMatchOptions options) : options_(options) {}

  absl::string_view name() const override { return "exact_match"; }

  // Returns InvalidArgument when the reference is empty after normalisation.
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override;

 private:
  const ExactMatchOptions options_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_EXACT_MATCH_H_
