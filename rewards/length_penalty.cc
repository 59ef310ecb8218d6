#include "rewards/length_penalty.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace lockstep::rewards {

absl::Status LengthPenaltyOptions::Validate() const {
  if (min_length < 0 || max_length <= 0 || max_length < min_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("length_penalty: need 0 <= min_length <= max_length and max_length > 0, got "
                     "min_length=",
                     min_length, " max_length=", max_length));
  }
  if (!(std::isfinite(penalty_per_unit) && penalty_per_unit >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "length_penalty: penalty_per_unit must be finite and >= 0, got ", penalty_per_unit));
  }
  if (!(std::isfinite(max_penalty) && max_penalty >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("length_penalty: max_penalty must be finite and >= 0, got ", max_penalty));
  }
  return absl::OkStatus();
}

int64_t TextLength(absl::string_view text, LengthUnit unit) {
  int64_t length = 0;
  if (unit == LengthUnit::kWords) {
    bool in_word = false;
    for (char c : text) {
      const bool space = absl::ascii_isspace(static_cast<unsigned char>(c));
      if (!space && !in_word) ++length;
      in_word = !space;
    }
    return length;
  }
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++length;  // not a continuation byte
  }
  return length;
}

absl::StatusOr<std::unique_ptr<LengthPenaltyReward>> LengthPenaltyReward::Create(
    LengthPenaltyOptions options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  return std::unique_ptr<LengthPenaltyReward>(new LengthPenaltyReward(options));
}

absl::StatusOr<RewardResult> LengthPenaltyReward::Score(const RewardInput& input) const {
  int64_t length;
  if (options_.unit == LengthUnit::kTokens) {
    if (input.completion_token_ids.empty() && !input.completion.empty()) {
      return absl::InvalidArgumentError(
          "length_penalty: unit is tokens but the item has no completion token ids");
    }
    length = static_cast<int64_t>(input.completion_token_ids.size());
  } else {
    length = TextLength(input.completion, options_.unit);
  }
  const int64_t distance =
      std::max<int64_t>({0, options_.min_length - length, length - options_.max_length});
  RewardResult result;
  result.reward =
      -std::min(options_.max_penalty, options_.penalty_per_unit * static_cast<double>(distance));
  if (result.reward == 0.0) result.reward = 0.0;  // no "-0" in logs
  result.sub_scores["length"] = static_cast<double>(length);
  return result;
}

}  // namespace lockstep::rewards
