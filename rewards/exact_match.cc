#include "rewards/exact_match.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"

namespace lockstep::rewards {

std::string NormalizeForExactMatch(absl::string_view text, const ExactMatchOptions& options) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char raw : text) {
    const auto c = static_cast<unsigned char>(raw);
    if (options.strip_punctuation && absl::ascii_ispunct(c)) continue;
    if (options.normalize_whitespace && absl::ascii_isspace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) {
      out.push_back(' ');
      pending_space = false;
    }
    out.push_back(options.ignore_case ? absl::ascii_tolower(c) : raw);
  }
  return out;
}

absl::StatusOr<RewardResult> ExactMatchReward::Score(const RewardInput& input) const {
  const std::string reference = NormalizeForExactMatch(input.reference, options_);
  if (reference.empty()) {
    return absl::InvalidArgumentError("exact_match: the item has no reference answer");
  }
  RewardResult result;
  result.reward = NormalizeForExactMatch(input.completion, options_) == reference ? 1.0 : 0.0;
  return result;
}

}  // namespace lockstep::rewards
