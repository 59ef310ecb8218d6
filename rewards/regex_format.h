// Regex format reward: `match_reward` when the completion matches a PCRE2 pattern, else
// `no_match_reward`. Sub-score "format" is 1 on a match, 0 otherwise. Typical use: reward a
// "<think>...</think><answer>...</answer>" layout, mixed into a rubric with a correctness reward.
#ifndef LOCKSTEP_REWARDS_REGEX_FORMAT_H_
#define LOCKSTEP_REWARDS_REGEX_FORMAT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

struct RegexFormatOptions {
  std::string pattern;      // PCRE2 syntax; required
  bool full_match = false;  // the whole completion must match (else: a match anywhere)
  bool dot_all = true;      // '.' also matches newlines (completions span lines)
  bool multiline = false;   // ^ and $ match at line breaks
  bool ignore_case = false;
  double match_reward = 1.0;
  double no_match_reward = 0.0;
};

class RegexFormatReward final : public Reward {
 public:
  // Compiles the pattern once. Returns InvalidArgument naming the offset and PCRE2's message
  // when it does not compile, or when a reward is not finite.
  static absl::StatusOr<std::unique_ptr<RegexFormatReward>> Create(RegexFormatOptions options);
  ~RegexFormatReward() override;

  absl::string_view name() const override { return "regex"; }

  // Returns true iff `text` matches. Invalid UTF-8 in `text` never matches across the bad bytes
  // and is not an error (a completion cut at max_tokens may end mid-character). Returns
  // ResourceExhausted when PCRE2 gives up (match or depth limit: a pathological pattern).
  // Thread safety: safe to call concurrently.
  absl::StatusOr<bool> Matches(absl::string_view text) const;

  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override;

 private:
  struct CompiledPattern;
  RegexFormatReward(RegexFormatOptions options, std::unique_ptr<CompiledPattern> compiled);

  const RegexFormatOptions options_;
  const std::unique_ptr<CompiledPattern> compiled_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REGEX_FORMAT_H_
