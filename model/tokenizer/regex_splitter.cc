#include "model/tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// Unicode White_Space (what Oniguruma's \s means with Unicode encodings), as class members.
constexpr std::string_view kWhiteSpaceMembers =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string PcreErrorMessage(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

absl::StatusOr<std::string> RewriteWhitespaceClasses(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char next = pattern[++i];
      if (next == 's') {
        if (in_class) {
          out.append(kWhiteSpaceMembers);
        } else {
          out.append("[").append(kWhiteSpaceMembers).append("]");
        }
      } else if (next == 'S') {
        if (in_class) {
          return absl::UnimplementedError(
              absl::StrCat("\\S inside a character class is not supported: ", std::string(pattern)));
        }
        out.append("[^").append(kWhiteSpaceMembers).append("]");
      } else {
        out.push_back(c);
        out.push_back(next);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::unique_ptr<Compiled> compiled) : compiled_(std::move(compiled)) {}
RegexSplitter::~RegexSplitter() = default;

absl::StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(std::string_view pattern) {
  absl::StatusOr<std::string> rewritten = RewriteWhitespaceClasses(pattern);
  if (!rewritten.ok()) return rewritten.status();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto compiled = std::make_unique<Compiled>();
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten->data()), rewritten->size(),
                                 PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("bad pre-tokenizer regex at offset ",
                                                   error_offset, ": ", PcreErrorMessage(error_code),
                                                   " in ", std::string(pattern)));
  }
  // JIT is an optimisation only; matching falls back to the interpreter where it is missing.
  pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<RegexSplitter>(new RegexSplitter(std::move(compiled)));
}

absl::Status RegexSplitter::Split(std::string_view text,
                                  std::vector<std::string_view>* pieces) const {
  // One match-data block per thread, reused across calls: the compiled code is read-only.
  thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match_data(
      pcre2_match_data_create(4, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_start = 0;
  size_t offset = 0;
  while (offset < text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK,
                         match_data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::InternalError(absl::StrCat("pre-tokenizer regex failed: ", PcreErrorMessage(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
    size_t begin = ovector[0];
    size_t end = ovector[1];
    if (end == begin) {  // Empty match: step over one UTF-8 character and search again.
      offset = begin + 1;
      while (offset < text.size() && (static_cast<uint8_t>(text[offset]) & 0xC0) == 0x80) ++offset;
      continue;
    }
    if (begin > gap_start) pieces->push_back(text.substr(gap_start, begin - gap_start));
    pieces->push_back(text.substr(begin, end - begin));
    gap_start = offset = end;
  }
  if (gap_start < text.size()) pieces->push_back(text.substr(gap_start));
  return absl::OkStatus();
}

}  // namespace lockstep
