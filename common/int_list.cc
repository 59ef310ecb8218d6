#include "common/int_list.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lockstep {

absl::StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text) {
  std::vector<int64_t> values;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(piece), &value)) {
      return absl::InvalidArgumentError(absl::StrCat("'", piece, "' is not an integer"));
    }
    values.push_back(value);
  }
  if (values.empty()) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is empty"));
  return values;
}

}  // namespace lockstep
