// The pre-tokenizer of a byte-level BPE tokenizer.json: a chain of regex splits (`Split` with
// behavior "Isolated", or `ByteLevel` with `use_regex: true`) followed by the ByteLevel byte
// mapping. Supported shapes: `ByteLevel`, `Split`, and a `Sequence` of them — what GPT-2,
// Llama 3 and Qwen2/Qwen3 ship. Anything else is rejected at load time, naming the type.
#ifndef LOCKSTEP_MODEL_TOKENIZER_PRE_TOKENIZER_H_
#define LOCKSTEP_MODEL_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/tokenizer/regex_splitter.h"
#include "nlohmann/json.hpp"

namespace lockstep {

class PreTokenizer {
 public:
  // Builds from the `pre_tokenizer` object of tokenizer.json.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& config);

  // Appends the pieces of `text` (valid UTF-8) to `pieces` as views into `text`. The pieces are
  // raw bytes; the byte-level character mapping is left to the BPE model, which works on bytes.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  // True when the chain ends with a ByteLevel step (the BPE model then runs on bytes).
  bool byte_level() const { return byte_level_; }

 private:
  absl::Status AddStep(const nlohmann::json& step);

  std::vector<std::unique_ptr<RegexSplitter>> splitters_;
  bool byte_level_ = false;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_PRE_TOKENIZER_H_
