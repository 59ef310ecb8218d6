#include "rewards/math_answer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace lockstep::rewards {
namespace {

constexpr size_t kNotFound = absl::string_view::npos;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)); }
bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// Given s[open] == '{', returns the index of the matching '}', or kNotFound. Escaped braces
// (\{ and \}) do not count.
size_t MatchBrace(absl::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
      ++i;
    } else if (s[i] == '{') {
      ++depth;
    } else if (s[i] == '}' && --depth == 0) {
      return i;
    }
  }
  return kNotFound;
}

// ---------------------------------------------------------------------------------------------
// Extraction

// Content of the last complete \boxed{...} / \fbox{...} (or "\boxed 5"), by start position.
std::optional<std::string> LastBoxed(absl::string_view text) {
  std::optional<std::string> last;
  for (size_t i = text.find('\\'); i != kNotFound; i = text.find('\\', i + 1)) {
    size_t command_end;
    if (text.compare(i + 1, 5, "boxed") == 0) {
      command_end = i + 6;
    } else if (text.compare(i + 1, 4, "fbox") == 0) {
      command_end = i + 5;
    } else {
      continue;
    }
    if (command_end < text.size() && IsAlpha(text[command_end])) continue;  // e.g. \boxedx
    size_t j = command_end;
    while (j < text.size() && IsSpace(text[j])) ++j;
    if (j < text.size() && text[j] == '{') {
      const size_t close = MatchBrace(text, j);
      if (close == kNotFound) continue;  // truncated box: not an answer
      last = std::string(text.substr(j + 1, close - j - 1));
    } else if (j > command_end) {  // "\boxed 5": one token
      size_t end = j;
      while (end < text.size() && !IsSpace(text[end]) && text[end] != '$') ++end;
      if (end > j) last = std::string(text.substr(j, end - j));
    }
  }
  return last;
}

// The text after the last "####", up to the end of its line.
std::optional<std::string> AfterHashes(absl::string_view text) {
  const size_t pos = text.rfind("####");
  if (pos == kNotFound) return std::nullopt;
  absl::string_view rest = text.substr(pos + 4);
  rest = rest.substr(0, rest.find('\n'));
  rest = absl::StripAsciiWhitespace(rest);
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

// Given that a number starts at s[i] (a digit, or '.' before a digit), returns its end:
// digits, then ",ddd" thousands groups, then ".digits", then "/digits".
size_t ScanNumber(absl::string_view s, size_t i) {
  const size_t n = s.size();
  auto digits_from = [&](size_t j) {
    while (j < n && IsDigit(s[j])) ++j;
    return j;
  };
  size_t j = digits_from(i);
  while (j + 3 < n && s[j] == ',' && IsDigit(s[j + 1]) && IsDigit(s[j + 2]) && IsDigit(s[j + 3]) &&
         (j + 4 == n || !IsDigit(s[j + 4]))) {
    j += 4;
  }
  if (j + 1 < n && s[j] == '.' && IsDigit(s[j + 1])) j = digits_from(j + 1);
  if (j + 1 < n && s[j] == '/' && IsDigit(s[j + 1])) j = digits_from(j + 1);
  return j;
}

std::optional<std::string> LastNumber(absl::string_view text) {
  std::optional<std::string> last;
  size_t i = 0;
  while (i < text.size()) {
    const bool starts =
        IsDigit(text[i]) || (text[i] == '.' && i + 1 < text.size() && IsDigit(text[i + 1]));
    if (!starts) {
      ++i;
      continue;
    }
    size_t start = i;
    const size_t end = ScanNumber(text, i);
    // A '-' right before is a sign unless it follows something that makes it a binary minus.
    if (start > 0 && text[start - 1] == '-') {
      const bool binary =
          start >= 2 && (absl::ascii_isalnum(static_cast<unsigned char>(text[start - 2])) ||
                         text[start - 2] == ')');
      if (!binary) --start;
    }
    last = std::string(text.substr(start, end - start));
    i = end;
  }
  return last;
}

// ---------------------------------------------------------------------------------------------
// Normalisation

std::string StripWrappers(absl::string_view s) {
  static constexpr std::pair<absl::string_view, absl::string_view> kWrappers[] = {
      {"$$", "$$"}, {"$", "$"}, {"\\(", "\\)"}, {"\\[", "\\]"}};
  s = absl::StripAsciiWhitespace(s);
  bool changed = true;
  while (changed) {
    changed = false;
    if (absl::ConsumeSuffix(&s, ".")) s = absl::StripAsciiWhitespace(s);
    for (const auto& [open, close] : kWrappers) {
      if (s.size() >= open.size() + close.size() && absl::StartsWith(s, open) &&
          absl::EndsWith(s, close)) {
        s = absl::StripAsciiWhitespace(
            s.substr(open.size(), s.size() - open.size() - close.size()));
        changed = true;
        break;
      }
    }
  }
  return std::string(s);
}

bool IsTextCommand(absl::string_view command) {
  static constexpr absl::string_view kTextCommands[] = {
      "text", "textbf", "textit", "textrm", "textnormal", "mathrm", "mathbf", "mbox", "boxed"};
  return std::find(std::begin(kTextCommands), std::end(kTextCommands), command) !=
         std::end(kTextCommands);
}

bool IsDroppedCommand(absl::string_view command) {
  static constexpr absl::string_view kDropped[] = {"left",   "right", "displaystyle", "circ",
                                                   "degree", "big",   "Big"};
  return std::find(std::begin(kDropped), std::end(kDropped), command) != std::end(kDropped);
}

// A fraction argument that prints without parentheses: an optionally signed decimal.
bool IsSimpleNumber(absl::string_view s) {
  absl::ConsumePrefix(&s, "-");
  if (s.empty()) return false;
  bool any_digit = false;
  for (char c : s) {
    if (IsDigit(c)) {
      any_digit = true;
    } else if (c != '.') {
      return false;
    }
  }
  return any_digit;
}

std::string RewriteLatex(absl::string_view s, bool drop_text);

// Reads one \frac argument at s[*i]: a braced group or a single non-space character.
std::optional<std::string> ReadFracArgument(absl::string_view s, size_t* i, bool drop_text) {
  while (*i < s.size() && IsSpace(s[*i])) ++*i;
  if (*i >= s.size()) return std::nullopt;
  if (s[*i] == '{') {
    const size_t close = MatchBrace(s, *i);
    if (close == kNotFound) return std::nullopt;
    std::string arg = RewriteLatex(s.substr(*i + 1, close - *i - 1), drop_text);
    *i = close + 1;
    return arg;
  }
  return std::string(1, s[(*i)++]);
}

// One pass over LaTeX commands: text commands are unwrapped (or dropped), \frac becomes a/b or
// (a)/(b), spacing/sizing commands and \% \$ vanish; $ % and the degree sign are removed.
std::string RewriteLatex(absl::string_view s, bool drop_text) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '$' || c == '%') {
      ++i;
      continue;
    }
    if (absl::StartsWith(s.substr(i), "\xC2\xB0")) {  // degree sign
      i += 2;
      continue;
    }
    if (absl::StartsWith(s.substr(i), "\xE2\x88\x92")) {  // Unicode minus
      out.push_back('-');
      i += 3;
      continue;
    }
    if (c != '\\') {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && IsAlpha(s[j])) ++j;
    const absl::string_view command = s.substr(i + 1, j - i - 1);
    if (command.empty()) {  // \% \$ \, \; \: \! "\ " vanish; \{ \} and the rest stay
      if (j < s.size() && absl::string_view("%$,;:! ").find(s[j]) != kNotFound) {
        i = j + 1;
      } else {
        out.push_back('\\');
        i = j;
      }
      continue;
    }
    if (IsTextCommand(command)) {
      size_t k = j;
      while (k < s.size() && IsSpace(s[k])) ++k;
      const size_t close = k < s.size() && s[k] == '{' ? MatchBrace(s, k) : kNotFound;
      if (close != kNotFound) {
        if (!drop_text || command == "boxed") {
          absl::StrAppend(&out, " ", RewriteLatex(s.substr(k + 1, close - k - 1), drop_text), " ");
        }
        i = close + 1;
        continue;
      }
    } else if (IsDroppedCommand(command)) {
      i = j;
      continue;
    } else if (command == "sqrt") {  // \sqrt3 -> \sqrt{3}
      size_t k = j;
      while (k < s.size() && IsSpace(s[k])) ++k;
      if (k < s.size() && s[k] != '{' && s[k] != '[' && s[k] != '\\') {
        absl::StrAppend(&out, "\\sqrt{", s.substr(k, 1), "}");
        i = k + 1;
        continue;
      }
    } else if (command == "frac" || command == "dfrac" || command == "tfrac") {
      size_t k = j;
      std::optional<std::string> numerator = ReadFracArgument(s, &k, drop_text);
      std::optional<std::string> denominator =
          numerator ? ReadFracArgument(s, &k, drop_text) : std::nullopt;
      if (denominator) {
        std::string num(absl::StripAsciiWhitespace(*numerator));
        std::string den(absl::StripAsciiWhitespace(*denominator));
        if (IsSimpleNumber(num) && IsSimpleNumber(den)) {
          // A digit right before a fraction is a mixed number: 1\frac{1}{2} = 1+1/2.
          if (!out.empty() && IsDigit(out.back())) out.push_back('+');
          absl::StrAppend(&out, num, "/", den);
        } else {
          absl::StrAppend(&out, "(", num, ")/(", den, ")");
        }
        i = k;
        continue;
      }
    }
    absl::StrAppend(&out, s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Removes "," between a digit and exactly three digits (1,234,567 -> 1234567).
std::string RemoveThousandsSeparators(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == ',' && i > 0 && IsDigit(s[i - 1]) && i + 3 < s.size() && IsDigit(s[i + 1]) &&
        IsDigit(s[i + 2]) && IsDigit(s[i + 3]) && (i + 4 == s.size() || !IsDigit(s[i + 4]))) {
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

// The last normalisation steps, on LaTeX-rewritten text.
std::string Finish(absl::string_view rewritten) {
  std::string s;
  for (char c : rewritten) {
    if (!IsSpace(c)) s.push_back(c);
  }
  s = absl::StrReplaceAll(s, {{"{,}", ","}, {"^{}", ""}});
  while (absl::EndsWith(s, "^") || absl::EndsWith(s, ".")) s.pop_back();
  // "x=5" -> "5" (one '=' after a plain variable name).
  const size_t eq = s.find('=');
  if (eq != std::string::npos && eq > 0 && s.find('=', eq + 1) == std::string::npos &&
      IsAlpha(s[0]) && std::all_of(s.begin(), s.begin() + eq, [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
      })) {
    s.erase(0, eq + 1);
  }
  s = RemoveThousandsSeparators(s);
  while (s.size() >= 2 && s.front() == '{' && MatchBrace(s, 0) == s.size() - 1) {
    s = s.substr(1, s.size() - 2);
  }
  if (absl::StartsWith(s, "+")) s.erase(0, 1);
  return s;
}

// Canonical spelling of an optionally signed decimal, or nullopt: no leading zeros, no
// trailing fractional zeros, no "+", no "-0".
std::optional<std::string> CanonicalDecimal(absl::string_view s) {
  bool negative = false;
  if (absl::ConsumePrefix(&s, "-")) {
    negative = true;
  } else {
    absl::ConsumePrefix(&s, "+");
  }
  const size_t dot = s.find('.');
  absl::string_view integer = s.substr(0, dot);
  absl::string_view fraction = dot == kNotFound ? absl::string_view() : s.substr(dot + 1);
  if (integer.empty() && fraction.empty()) return std::nullopt;
  for (char c : integer) {
    if (!IsDigit(c)) return std::nullopt;
  }
  for (char c : fraction) {
    if (!IsDigit(c)) return std::nullopt;
  }
  while (integer.size() > 1 && integer.front() == '0') integer.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  std::string out = integer.empty() ? "0" : std::string(integer);
  if (!fraction.empty()) absl::StrAppend(&out, ".", fraction);
  if (negative && out != "0") out.insert(0, "-");
  return out;
}

absl::string_view StripParentheses(absl::string_view s) {
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') return s.substr(1, s.size() - 2);
  return s;
}

// Canonical number: "d", "n/d" or "i+n/d" (mixed), each part a canonical decimal, with one
// leading '-' for the whole value. nullopt when `s` is not a number.
std::optional<std::string> CanonicalNumber(absl::string_view s) {
  if (s.empty()) return std::nullopt;
  if (auto decimal = CanonicalDecimal(s)) return decimal;
  const size_t slash = s.find('/');
  if (slash == kNotFound || s.find('/', slash + 1) != kNotFound) return std::nullopt;
  absl::string_view left = s.substr(0, slash);
  bool negative = absl::ConsumePrefix(&left, "-");
  std::string whole;
  const size_t plus = left.find('+');
  if (plus != kNotFound) {  // mixed number
    std::optional<std::string> integer = CanonicalDecimal(left.substr(0, plus));
    if (!integer || integer->find_first_of("-.") != std::string::npos) return std::nullopt;
    whole = *integer;
    left = left.substr(plus + 1);
  }
  std::optional<std::string> numerator = CanonicalDecimal(StripParentheses(left));
  std::optional<std::string> denominator = CanonicalDecimal(StripParentheses(s.substr(slash + 1)));
  if (!numerator || !denominator || *denominator == "0") return std::nullopt;
  for (std::string* part : {&*numerator, &*denominator}) {
    if (absl::StartsWith(*part, "-")) {
      part->erase(0, 1);
      negative = !negative;
    }
  }
  if (!whole.empty() && numerator->find('.') != std::string::npos) return std::nullopt;
  std::string out = whole.empty() ? absl::StrCat(*numerator, "/", *denominator)
                                  : absl::StrCat(whole, "+", *numerator, "/", *denominator);
  if (negative && *numerator != "0") out.insert(0, "-");
  return out;
}

// Value of a canonical number (see CanonicalNumber).
double CanonicalValue(absl::string_view canonical) {
  const bool negative = absl::ConsumePrefix(&canonical, "-");
  auto parse = [](absl::string_view part) {
    return std::strtod(std::string(part).c_str(), nullptr);
  };
  double value;
  const size_t slash = canonical.find('/');
  if (slash == kNotFound) {
    value = parse(canonical);
  } else {
    absl::string_view left = canonical.substr(0, slash);
    double whole = 0.0;
    const size_t plus = left.find('+');
    if (plus != kNotFound) {
      whole = parse(left.substr(0, plus));
      left = left.substr(plus + 1);
    }
    value = whole + parse(left) / parse(canonical.substr(slash + 1));
  }
  return negative ? -value : value;
}

// "5 apples" -> "5": drops trailing words that follow a space.
std::string StripTrailingWords(absl::string_view s) {
  s = absl::StripTrailingAsciiWhitespace(s);
  size_t end = s.size();
  while (end > 0 && (IsAlpha(s[end - 1]) || IsSpace(s[end - 1]))) --end;
  if (end == s.size() || end == 0 || !IsSpace(s[end])) return std::string(s);
  return std::string(s.substr(0, end));
}

struct Normalized {
  std::string text;
  bool is_number = false;
};

Normalized Normalize(absl::string_view answer) {
  const std::string stripped = StripWrappers(answer);
  const std::string dropped = RewriteLatex(stripped, /*drop_text=*/true);
  for (const std::string& candidate : {Finish(dropped), Finish(StripTrailingWords(dropped))}) {
    if (auto number = CanonicalNumber(candidate)) return {*number, true};
  }
  std::string unwrapped = Finish(RewriteLatex(stripped, /*drop_text=*/false));
  if (auto number = CanonicalNumber(unwrapped)) return {*number, true};
  return {unwrapped, false};
}

bool IsInteger(const Normalized& n) {
  return n.is_number && n.text.find_first_of("./+") == std::string::npos;
}

}  // namespace

absl::Status MathAnswerOptions::Validate() const {
  if (!(tolerance >= 0.0 && tolerance < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("math: tolerance must be in [0, 1), got ", tolerance));
  }
  return absl::OkStatus();
}

std::optional<ExtractedAnswer> ExtractMathAnswer(absl::string_view text, bool use_last_number) {
  if (auto boxed = LastBoxed(text)) return ExtractedAnswer{std::move(*boxed), AnswerSource::kBoxed};
  if (auto hashes = AfterHashes(text)) {
    return ExtractedAnswer{std::move(*hashes), AnswerSource::kHashes};
  }
  if (use_last_number) {
    if (auto number = LastNumber(text)) {
      return ExtractedAnswer{std::move(*number), AnswerSource::kLastNumber};
    }
  }
  return std::nullopt;
}

std::string NormalizeMathAnswer(absl::string_view answer) { return Normalize(answer).text; }

std::optional<double> MathAnswerValue(absl::string_view answer) {
  const Normalized n = Normalize(answer);
  if (!n.is_number) return std::nullopt;
  return CanonicalValue(n.text);
}

bool MathAnswersMatch(absl::string_view a, absl::string_view b, double tolerance) {
  const Normalized x = Normalize(a);
  const Normalized y = Normalize(b);
  if (x.text.empty() || y.text.empty()) return false;
  if (x.text == y.text) return true;
  if (!x.is_number || !y.is_number) return false;
  // Integers compare exactly: a relative tolerance would let 1000000 match 1000001.
  if (IsInteger(x) && IsInteger(y)) return false;
  const double u = CanonicalValue(x.text);
  const double v = CanonicalValue(y.text);
  return std::abs(u - v) <= tolerance * std::max({1.0, std::abs(u), std::abs(v)});
}

absl::StatusOr<std::unique_ptr<MathAnswerReward>> MathAnswerReward::Create(
    MathAnswerOptions options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  return std::unique_ptr<MathAnswerReward>(new MathAnswerReward(options));
}

absl::StatusOr<RewardResult> MathAnswerReward::Score(const RewardInput& input) const {
  // A GSM8K solution carries its answer after "####"; a MATH solution in \boxed{}.
  std::optional<ExtractedAnswer> reference =
      ExtractMathAnswer(input.reference, /*use_last_number=*/false);
  const std::string reference_answer = reference ? reference->text : input.reference;
  if (NormalizeMathAnswer(reference_answer).empty()) {
    return absl::InvalidArgumentError("math: the item has no reference answer");
  }
  RewardResult result;
  std::optional<ExtractedAnswer> answer =
      ExtractMathAnswer(input.completion, options_.use_last_number);
  const bool found = answer.has_value() && !NormalizeMathAnswer(answer->text).empty();
  result.sub_scores["format"] = found ? 1.0 : 0.0;
  result.reward =
      found && MathAnswersMatch(answer->text, reference_answer, options_.tolerance) ? 1.0 : 0.0;
  return result;
}

}  // namespace lockstep::rewards
