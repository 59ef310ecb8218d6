#include "model/tokenizer/incremental_decoder.h"

#include "model/tokenizer/utf8.h"

namespace lockstep {

absl::StatusOr<std::string> IncrementalDecoder::Push(int32_t id) {
  absl::StatusOr<std::string_view> bytes = tokenizer_->TokenBytes(id);
  if (!bytes.ok()) return bytes.status();
  if (skip_special_tokens_ && tokenizer_->IsSpecial(id)) return std::string();
  pending_.append(*bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    int length = Utf8CharLength(std::string_view(pending_).substr(i));
    if (length < 0) break;  // Incomplete: wait for the next token.
    if (length == 0) {
      out.append(kReplacementCharacter);
      i += 1;
      continue;
    }
    out.append(pending_, i, length);
    i += length;
  }
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::string out = pending_.empty() ? "" : std::string(kReplacementCharacter);
  pending_.clear();
  return out;
}

}  // namespace lockstep
