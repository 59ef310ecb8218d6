// GPT-2 style byte-level mapping used by byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2/3).
// Every byte 0..255 maps to one printable Unicode character so that BPE vocabularies can be
// stored as text: printable Latin-1 bytes map to themselves, the other 68 bytes map to
// U+0100.. in byte order. Example: ' ' (0x20) -> 'Ġ' (U+0120), '\n' (0x0A) -> 'Ċ' (U+010A).
#ifndef LOCKSTEP_MODEL_TOKENIZER_BYTE_LEVEL_H_
#define LOCKSTEP_MODEL_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep {

// Returns the UTF-8 encoding of the character that byte `byte` maps to.
const std::string& ByteToUnicode(uint8_t byte);

// Maps every byte of `bytes` to its character and appends the UTF-8 result to `out`.
void AppendByteLevelEncoded(std::string_view bytes, std::string* out);

// Inverse of AppendByteLevelEncoded: maps each character of `text` back to its byte and
// appends it to `out`. Returns false (leaving a partial result) if `text` holds a character
// outside the 256-character alphabet or invalid UTF-8.
bool AppendByteLevelDecoded(std::string_view text, std::string* out);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_BYTE_LEVEL_H_
