// The tokenizer of tiny models made by `lockstep init-model`: pure byte-level, no merges.
//   ids 0..255   : one token per byte, id == byte value; the token's string is the byte's
//                  GPT-2 byte-level character (byte 0x20 ' ' is "Ġ", byte 0x41 'A' is "A").
//   id 256       : <|endoftext|>  (special; pad)
//   id 257       : <|im_start|>   (special)
//   id 258       : <|im_end|>     (special; eos)
//   id 259, 260  : <think>, </think> (added, not special, as in Qwen3)
// All ids stay below 512, the vocabulary size of tiny models. tokenizer_config.json carries
// Qwen3's chat_template, so chats render as for Qwen3 in lockstep and in Hugging Face tooling.
#ifndef LOCKSTEP_MODEL_TOKENIZER_BYTE_TOKENIZER_WRITER_H_
#define LOCKSTEP_MODEL_TOKENIZER_BYTE_TOKENIZER_WRITER_H_

#include <cstdint>
#include <filesystem>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace lockstep {

// One more than the largest id the byte-level tokenizer uses.
inline constexpr int32_t kByteTokenizerNumIds = 261;
inline constexpr int32_t kByteTokenizerEndOfTextId = 256;
inline constexpr int32_t kByteTokenizerImStartId = 257;
inline constexpr int32_t kByteTokenizerImEndId = 258;

// The documents written by WriteByteLevelTokenizerFiles.
nlohmann::json ByteLevelTokenizerJson();
nlohmann::json ByteLevelTokenizerConfigJson();

// Writes `model_dir`/tokenizer.json and `model_dir`/tokenizer_config.json (overwriting them).
// `model_dir` must exist.
absl::Status WriteByteLevelTokenizerFiles(const std::filesystem::path& model_dir);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_BYTE_TOKENIZER_WRITER_H_
