// Splits text with a Hugging Face `Split` pre-tokenizer regex (behavior "Isolated"): every match
// is one piece and so is every non-empty gap between matches. The regex runs in PCRE2 with UTF
// and UCP, so \p{L}, \p{N} and (?i:...) follow Unicode as Hugging Face's Oniguruma does. `\s`
// and `\S` are rewritten to the Unicode White_Space property (Oniguruma's meaning), which differs
// from PCRE2's own \s on U+180E.
#ifndef LOCKSTEP_MODEL_TOKENIZER_REGEX_SPLITTER_H_
#define LOCKSTEP_MODEL_TOKENIZER_REGEX_SPLITTER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

class RegexSplitter {
 public:
  // Compiles `pattern` (Oniguruma/Hugging Face syntax). Errors name the offset PCRE2 rejected.
  static absl::StatusOr<std::unique_ptr<RegexSplitter>> Create(std::string_view pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` to `pieces` as views into `text`. `text` must be valid UTF-8
  // (the caller checks once). Thread-safe: the compiled pattern is shared, match state is not.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Compiled;
  explicit RegexSplitter(std::unique_ptr<Compiled> compiled);
  std::unique_ptr<Compiled> compiled_;
};

// Rewrites \s and \S in `pattern` to explicit Unicode White_Space classes. Exposed for tests.
absl::StatusOr<std::string> RewriteWhitespaceClasses(std::string_view pattern);

// The regex of GPT-2's ByteLevel pre-tokenizer (`use_regex: true`).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_REGEX_SPLITTER_H_
