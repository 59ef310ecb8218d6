// Small UTF-8 helpers shared by the tokenizer, its incremental decoder and the chat templates.
#ifndef LOCKSTEP_MODEL_TOKENIZER_UTF8_H_
#define LOCKSTEP_MODEL_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string_view>

namespace lockstep {

// Returns the length of the first valid UTF-8 character of `bytes`; 0 if `bytes` starts with an
// invalid sequence; -1 if `bytes` is a valid but incomplete prefix of a character (more bytes
// could still make it valid); `bytes` must not be empty. Rejects overlong forms and surrogates.
int Utf8CharLength(std::string_view bytes);

// Returns the offset of the first invalid byte of `bytes`, or npos if it is all valid UTF-8.
size_t FindInvalidUtf8(std::string_view bytes);

// UTF-8 of U+FFFD, written where invalid bytes are replaced.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_UTF8_H_
