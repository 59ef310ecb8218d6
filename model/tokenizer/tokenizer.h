// A Hugging Face `tokenizer.json` with a byte-level BPE model (GPT-2, Llama 3, Qwen2/Qwen3):
//   added tokens (matched in raw text) -> normalizer (NFC or none) -> pre-tokenizer (regex
//   splits + ByteLevel) -> BPE merges by rank.
// Encode() never adds BOS/EOS or other post-processor tokens: chat templates write them as text
// and the added-token matcher turns them into their ids. Parts of a tokenizer.json this class
// does not implement are load-time errors, never silently different ids.
#ifndef LOCKSTEP_MODEL_TOKENIZER_TOKENIZER_H_
#define LOCKSTEP_MODEL_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/tokenizer/added_vocabulary.h"
#include "model/tokenizer/bpe.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace lockstep {

class Tokenizer {
 public:
  // Loads `path` (a tokenizer.json file, or a directory holding one).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::filesystem::path& path);
  // Loads from the text of a tokenizer.json.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonString(std::string_view json_text);

  // Returns the ids of `text`, which must be valid UTF-8 (InvalidArgument names the offset of
  // the first bad byte otherwise). Thread-safe.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;

  // Returns the bytes of `ids` concatenated (special tokens dropped when `skip_special_tokens`).
  // The result is the exact inverse of Encode; it is not valid UTF-8 when `ids` end inside a
  // character (use IncrementalDecoder for streams). Fails on an id outside the vocabulary.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens = false) const;

  // The bytes one token stands for (an added token's content, or a vocab entry's bytes).
  absl::StatusOr<std::string_view> TokenBytes(int32_t id) const;
  // The token's string as stored in tokenizer.json (byte-level text such as "Ġhello").
  absl::StatusOr<std::string_view> IdToToken(int32_t id) const;
  // The id of a token given as its tokenizer.json string (vocab entry or added token).
  std::optional<int32_t> TokenToId(std::string_view token) const;
  bool IsSpecial(int32_t id) const;

  // One more than the largest id, counting added tokens.
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  const AddedVocabulary& added_vocabulary() const { return added_; }

 private:
  Tokenizer() = default;
  absl::Status EncodeSection(std::string_view text, std::vector<int32_t>* ids) const;

  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  Normalizer normalizer_;
  AddedVocabulary added_;
  std::vector<std::string> token_bytes_;  // By id; decoded once at load.
  std::vector<bool> valid_id_;            // False for holes in the id space.
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_TOKENIZER_H_
