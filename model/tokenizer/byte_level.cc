#include "model/tokenizer/byte_level.h"

#include <array>

namespace lockstep {
namespace {

std::string EncodeUtf8(uint32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else {  // The alphabet stays below U+0800: two bytes suffice.
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
  return out;
}

struct ByteLevelTables {
  std::array<std::string, 256> byte_to_unicode;
  std::array<int16_t, 0x200> code_point_to_byte;  // -1 where the code point is not in the alphabet.

  ByteLevelTables() {
    code_point_to_byte.fill(-1);
    // Bytes that are printable Latin-1 keep their own code point; the rest get U+0100 + n
    // in increasing byte order (bytes_to_unicode() in GPT-2's encoder.py).
    int next_extra = 0;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                       (byte >= 0xAE && byte <= 0xFF);
      uint32_t code_point = printable ? byte : 256 + next_extra++;
      byte_to_unicode[byte] = EncodeUtf8(code_point);
      code_point_to_byte[code_point] = static_cast<int16_t>(byte);
    }
  }
};

const ByteLevelTables& Tables() {
  static const ByteLevelTables* tables = new ByteLevelTables();
  return *tables;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Tables().byte_to_unicode[byte]; }

void AppendByteLevelEncoded(std::string_view bytes, std::string* out) {
  const ByteLevelTables& tables = Tables();
  for (char c : bytes) out->append(tables.byte_to_unicode[static_cast<uint8_t>(c)]);
}

bool AppendByteLevelDecoded(std::string_view text, std::string* out) {
  const ByteLevelTables& tables = Tables();
  size_t i = 0;
  while (i < text.size()) {
    uint8_t lead = static_cast<uint8_t>(text[i]);
    uint32_t code_point;
    if (lead < 0x80) {
      code_point = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < text.size()) {
      code_point = ((lead & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;
    }
    if (code_point >= tables.code_point_to_byte.size() || tables.code_point_to_byte[code_point] < 0) {
      return false;
    }
    out->push_back(static_cast<char>(tables.code_point_to_byte[code_point]));
  }
  return true;
}

}  // namespace lockstep
