// The `normalizer` of a tokenizer.json. Supported: none (null), `NFC` (Qwen2/Qwen3), and a
// `Sequence` of NFC steps. Other normalizers are rejected at load time, naming the type.
#ifndef LOCKSTEP_MODEL_TOKENIZER_NORMALIZER_H_
#define LOCKSTEP_MODEL_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep {

class Normalizer {
 public:
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& config);

  // True when Normalize() would return its input unchanged for every text.
  bool is_identity() const { return !nfc_; }

  // Returns `text` (valid UTF-8) normalized. Returns a view of `text` itself when nothing
  // changes, else a view of `*storage`. Thread-safe.
  absl::StatusOr<std::string_view> Normalize(std::string_view text, std::string* storage) const;

 private:
  bool nfc_ = false;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_NORMALIZER_H_
