#include "orchestrator/valid_utf8.h"

#include "model/tokenizer/utf8.h"

namespace lockstep::orchestrator {

std::string ValidUtf8(std::string_view bytes) {
  if (FindInvalidUtf8(bytes) == std::string_view::npos) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  while (!bytes.empty()) {
    const int length = Utf8CharLength(bytes);
    if (length > 0) {
      out.append(bytes.substr(0, static_cast<size_t>(length)));
      bytes.remove_prefix(static_cast<size_t>(length));
    } else {
      out.append(kReplacementCharacter);
      bytes.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace lockstep::orchestrator
