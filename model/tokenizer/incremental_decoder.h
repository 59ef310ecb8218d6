// Streaming detokenization: turns token ids into text as they are generated, never emitting
// half a UTF-8 character. A byte-level BPE token may end inside a multi-byte character (emoji,
// CJK); its bytes are held back until the character is complete.
#ifndef LOCKSTEP_MODEL_TOKENIZER_INCREMENTAL_DECODER_H_
#define LOCKSTEP_MODEL_TOKENIZER_INCREMENTAL_DECODER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer.h"

namespace lockstep {

// Not thread-safe: one decoder per stream. `tokenizer` is not owned and must outlive it.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer* tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Adds one token and returns the text completed by it: only whole, valid UTF-8 characters.
  // A byte that can never start or continue a valid character comes out as U+FFFD. Fails on an
  // id outside the vocabulary (the decoder state is then unchanged).
  absl::StatusOr<std::string> Push(int32_t id);

  // Ends the stream: returns what is still held back, an incomplete character as U+FFFD.
  std::string Flush();

  // Bytes held back waiting for the rest of a character (at most 3).
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_INCREMENTAL_DECODER_H_
