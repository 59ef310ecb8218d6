// Added tokens of a tokenizer.json (`added_tokens`): special tokens such as <|im_start|> and
// plain added tokens such as <think>. They are matched in the raw text before normalization
// and pre-tokenization, leftmost first and longest first at a position, and each becomes exactly
// its own id. `lstrip`, `rstrip` and `single_word` are rejected at load time (no Qwen or Llama 3
// file uses them).
#ifndef LOCKSTEP_MODEL_TOKENIZER_ADDED_VOCABULARY_H_
#define LOCKSTEP_MODEL_TOKENIZER_ADDED_VOCABULARY_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;  // Dropped by Decode(..., skip_special_tokens = true).
};

class AddedVocabulary {
 public:
  // A run of ordinary text (id < 0) or one added token (id >= 0).
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  static absl::StatusOr<AddedVocabulary> FromJson(const nlohmann::json& added_tokens);

  // Splits `text` into segments, as views into `text`. Empty text gives no segments.
  void Split(std::string_view text, std::vector<Segment>* segments) const;

  // Returns the added token with this id, or nullptr.
  const AddedToken* FindById(int32_t id) const;
  // Returns the id of the added token with exactly this content, or -1.
  int32_t FindByContent(std::string_view content) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, size_t> index_by_id_;
  // For each first byte, the indices of the tokens starting with it, longest content first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_ADDED_VOCABULARY_H_
