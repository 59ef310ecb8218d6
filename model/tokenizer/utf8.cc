#include "model/tokenizer/utf8.h"

#include <cstdint>

namespace lockstep {

int Utf8CharLength(std::string_view bytes) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  int length;
  uint8_t second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // Overlong.
    if (lead == 0xED) second_max = 0x9F;  // Surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // Overlong.
    if (lead == 0xF4) second_max = 0x8F;  // Above U+10FFFF.
  } else {
    return 0;
  }
  for (int i = 1; i < length; ++i) {
    if (static_cast<size_t>(i) >= bytes.size()) return -1;
    uint8_t min = i == 1 ? second_min : 0x80;
    uint8_t max = i == 1 ? second_max : 0xBF;
    if (byte(i) < min || byte(i) > max) return 0;
  }
  return length;
}

size_t FindInvalidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {  // ASCII fast path.
      ++i;
      continue;
    }
    int length = Utf8CharLength(bytes.substr(i));
    if (length <= 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace lockstep
