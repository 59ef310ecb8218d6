// Math answer reward: extracts the final answer of a completion and compares it with the
// reference answer after normalisation. Reward 1 when they match, 0 otherwise; sub-score
// "format" is 1 when the completion contained an answer at all.
//
// Extraction, first that applies:
//   1. the last \boxed{...} (or \fbox{...}); nested braces are matched, escaped \{ \} skipped;
//   2. the text after the last "####" up to the end of that line (GSM8K style);
//   3. the last number in the text (optional, on by default).
// Normalisation: surrounding spaces, $...$, \(...\) and \[...\] are stripped; \text{...},
// \mathrm{...} and \mbox{...} units are dropped when a number remains (else unwrapped); $, \%,
// %, degree signs, \left/\right and LaTeX spacing are removed; \dfrac and \tfrac read as \frac;
// \frac{a}{b}, \frac12 and a/b are fractions; \sqrt3 reads as \sqrt{3}; 1,234 and 1{,}234 lose their separators; a leading
// "x =" is dropped; numbers print without leading zeros, trailing decimal zeros or "+".
// Comparison: two integers compare exactly; otherwise two numbers match when
// |a - b| <= tolerance * max(1, |a|, |b|); anything else compares as normalised strings.
// A percentage compares as its number: "50%" matches "50", not "0.5".
#ifndef LOCKSTEP_REWARDS_MATH_ANSWER_H_
#define LOCKSTEP_REWARDS_MATH_ANSWER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

struct MathAnswerOptions {
  // Relative tolerance for non-integer numeric comparison (see above). Must be in [0, 1).
  double tolerance = 1e-9;
  // Fall back to the last number in the completion when there is no \boxed{} and no "####".
  bool use_last_number = true;

  absl::Status Validate() const;
};

enum class AnswerSource { kBoxed, kHashes, kLastNumber };

struct ExtractedAnswer {
  std::string text;  // raw answer text, not yet normalised
  AnswerSource source;
};

// Returns the final answer in `text` (see the extraction order above), or nullopt if there is
// none. A \boxed{ without its closing brace is ignored.
std::optional<ExtractedAnswer> ExtractMathAnswer(absl::string_view text,
                                                 bool use_last_number = true);

// Returns the canonical form of an answer: for a number, its plain decimal or "n/d" spelling
// ("1,234.50" -> "1234.5", "\dfrac{3}{4}" -> "3/4", "-\frac12" -> "-1/2"); otherwise the
// LaTeX-normalised text with all whitespace removed. Empty when nothing remains.
std::string NormalizeMathAnswer(absl::string_view answer);

// Returns the value of an answer if it normalises to a number (decimal, fraction or mixed
// number), else nullopt.
std::optional<double> MathAnswerValue(absl::string_view answer);

// Returns true iff the two raw answers match under the comparison rules above.
bool MathAnswersMatch(absl::string_view a, absl::string_view b, double tolerance = 1e-9);

class MathAnswerReward final : public Reward {
 public:
  // Returns InvalidArgument if the options do not validate.
  static absl::StatusOr<std::unique_ptr<MathAnswerReward>> Create(MathAnswerOptions options);

  absl::string_view name() const override { return "math"; }

  // The reference may be a bare answer or itself contain \boxed{} or "####" (GSM8K solutions).
  // Returns InvalidArgument when the reference is empty: such an item cannot be scored.
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override;

 private:
  explicit MathAnswerReward(MathAnswerOptions options) : options_(options) {}

  const MathAnswerOptions options_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_MATH_ANSWER_H_
