#include "rewards/regex_format.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace lockstep::rewards {

// Owns the compiled pattern. pcre2_code is read-only after compilation (and JIT compilation),
// so one instance serves concurrent matches, each with its own match data.
struct RegexFormatReward::CompiledPattern {
  explicit CompiledPattern(pcre2_code* code) : code(code) {}
  ~CompiledPattern() { pcre2_code_free(code); }
  CompiledPattern(const CompiledPattern&) = delete;
  CompiledPattern& operator=(const CompiledPattern&) = delete;

  pcre2_code* const code;
};

absl::StatusOr<std::unique_ptr<RegexFormatReward>> RegexFormatReward::Create(
    RegexFormatOptions options) {
  if (options.pattern.empty()) {
    return absl::InvalidArgumentError("regex: the pattern is empty");
  }
  if (!std::isfinite(options.match_reward) || !std::isfinite(options.no_match_reward)) {
    return absl::InvalidArgumentError("regex: match_reward and no_match_reward must be finite");
  }
  uint32_t flags = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  if (options.full_match) flags |= PCRE2_ANCHORED | PCRE2_ENDANCHORED;
  if (options.dot_all) flags |= PCRE2_DOTALL;
  if (options.multiline) flags |= PCRE2_MULTILINE;
  if (options.ignore_case) flags |= PCRE2_CASELESS;
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(options.pattern.data()), options.pattern.size(),
                    flags, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("regex: pattern \"", options.pattern,
                                                   "\" does not compile at offset ", error_offset,
                                                   ": ", reinterpret_cast<const char*>(message)));
  }
  // JIT is an optimisation only; the interpreter serves when it is unavailable.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto compiled = std::make_unique<CompiledPattern>(code);
  return std::unique_ptr<RegexFormatReward>(
      new RegexFormatReward(std::move(options), std::move(compiled)));
}

RegexFormatReward::RegexFormatReward(RegexFormatOptions options,
                                     std::unique_ptr<CompiledPattern> compiled)
    : options_(std::move(options)), compiled_(std::move(compiled)) {}

RegexFormatReward::~RegexFormatReward() = default;

absl::StatusOr<bool> RegexFormatReward::Matches(absl::string_view text) const {
  pcre2_match_data* match_data = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (match_data == nullptr) return absl::ResourceExhaustedError("regex: out of memory");
  const int rc = pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                             text.size(), 0, 0, match_data, nullptr);
  pcre2_match_data_free(match_data);
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(rc, message, sizeof(message));
  return absl::ResourceExhaustedError(
      absl::StrCat("regex: matching \"", options_.pattern,
                   "\" failed: ", reinterpret_cast<const char*>(message)));
}

absl::StatusOr<RewardResult> RegexFormatReward::Score(const RewardInput& input) const {
  absl::StatusOr<bool> matches = Matches(input.completion);
  if (!matches.ok()) return matches.status();
  const bool matched = *matches;
  RewardResult result;
  result.reward = matched ? options_.match_reward : options_.no_match_reward;
  result.sub_scores["format"] = matched ? 1.0 : 0.0;
  return result;
}

}  // namespace lockstep::rewards
