// Length penalty: 0 inside a target band [min_length, max_length], falling linearly outside it:
//   reward = -min(max_penalty, penalty_per_unit * distance),
//   distance = max(0, min_length - length, length - max_length).
// Sub-score "length" is the measured length. DAPO's soft overlong punishment is the band
// [0, L_max - L_cache] with penalty_per_unit = 1 / L_cache and max_penalty = 1 in tokens.
#ifndef LOCKSTEP_REWARDS_LENGTH_PENALTY_H_
#define LOCKSTEP_REWARDS_LENGTH_PENALTY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

enum class LengthUnit {
  kCharacters,  // Unicode code points of the completion (UTF-8 continuation bytes not counted)
  kWords,       // runs of non-whitespace
  kTokens,      // completion_token_ids; an item without them cannot be scored
};

struct LengthPenaltyOptions {
  LengthUnit unit = LengthUnit::kCharacters;
  int64_t min_length = 0;
  int64_t max_length = 0;          // required: >= min_length, > 0
  double penalty_per_unit = 1e-3;  // >= 0
  double max_penalty = 1.0;        // >= 0; the penalty never exceeds it

  absl::Status Validate() const;
};

// Returns the length of `text` in characters (code points) or words.
int64_t TextLength(absl::string_view text, LengthUnit unit);

class LengthPenaltyReward final : public Reward {
 public:
  // Returns InvalidArgument when the options do not validate.
  static absl::StatusOr<std::unique_ptr<LengthPenaltyReward>> Create(LengthPenaltyOptions options);

  absl::string_view name() const override { return "length_penalty"; }

  // Returns the penalty (<= 0). With unit kTokens, returns InvalidArgument for an item with a
  // non-empty completion but no token ids.
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override;

 private:
  explicit LengthPenaltyReward(LengthPenaltyOptions options) : options_(options) {}

  const LengthPenaltyOptions options_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_LENGTH_PENALTY_H_
