// Rubric: a weighted sum of rewards. reward = sum_i weight_i * reward_i. Every component is
// logged: sub-score "<name>" holds its (unweighted) reward and "<name>/<sub>" each of its own
// sub-scores, so "correct/format" tells how often a math answer was found at all.
#ifndef LOCKSTEP_REWARDS_RUBRIC_H_
#define LOCKSTEP_REWARDS_RUBRIC_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

struct RubricComponent {
  std::string name;  // unique within the rubric, no '/'
  double weight = 1.0;
  std::unique_ptr<Reward> reward;
};

class Rubric final : public Reward {
 public:
  // Takes ownership of the components. Returns InvalidArgument when there are none, a name is
  // empty, repeated or contains '/', a weight is not finite, or a reward is null.
  static absl::StatusOr<std::unique_ptr<Rubric>> Create(std::vector<RubricComponent> components);

  absl::string_view name() const override { return "rubric"; }

  // Scores every component. If one fails, the item fails (same code, message naming the
  // component): a partial sum would silently score the item as if that component were 0.
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override;

 private:
  explicit Rubric(std::vector<RubricComponent> components) : components_(std::move(components)) {}

  const std::vector<RubricComponent> components_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_RUBRIC_H_
