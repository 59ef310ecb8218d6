// The reward interface: a reward is a pure function of one scored item
// {prompt, completion, reference answer, metadata} -> a scalar plus named sub-scores.
//
// Built-ins (math_answer.h, exact_match.h, regex_format.h, length_penalty.h, rubric.h) run
// in-process; reward_registry.h builds them by name from JSON options. Remote rewards (gRPC
// lockstep.v1.Reward) implement the same contract on the other side of the wire. Nothing here
// depends on LibTorch, gRPC or protobuf.
#ifndef LOCKSTEP_REWARDS_REWARD_H_
#define LOCKSTEP_REWARDS_REWARD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::rewards {

// One item to score. The reward reads it and keeps no reference to it after Score returns.
struct RewardInput {
  std::string prompt;                           // the prompt text (chat-templated or plain)
  std::string completion;                       // the model's completion text
  std::vector<int32_t> completion_token_ids;    // may be empty when only text is known
  std::string reference;                        // reference answer; may be empty
  std::map<std::string, std::string> metadata;  // free-form, from the dataset row
};

struct RewardResult {
  double reward = 0.0;
  // Named components, logged as metrics (e.g. "format" for "an answer was found"). Ordered so
  // that logs and tests are deterministic.
  std::map<std::string, double> sub_scores;
};

class Reward {
 public:
  virtual ~Reward() = default;

  // Short name for logs and error messages, e.g. "math".
  virtual absl::string_view name() const = 0;

  // Scores one item. A non-OK status means "this item could not be scored" (e.g. a math reward
  // given no reference); callers report it as failed and never substitute 0.
  // Thread safety: Score is const and safe to call concurrently from any thread.
  virtual absl::StatusOr<RewardResult> Score(const RewardInput& input) const = 0;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REWARD_H_
