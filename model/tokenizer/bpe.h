// Byte-level BPE model of a Hugging Face tokenizer.json (`model.type == "BPE"`): a vocabulary of
// byte-level strings, and merges applied lowest rank first (leftmost first among equal ranks),
// exactly as Hugging Face tokenizers does. Words are given as raw bytes; each byte starts as the
// token of its byte-level character.
#ifndef LOCKSTEP_MODEL_TOKENIZER_BPE_H_
#define LOCKSTEP_MODEL_TOKENIZER_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace lockstep {

class BpeModel {
 public:
  // Builds from the `model` object of tokenizer.json. Requires every one of the 256 byte-level
  // characters in the vocabulary; rejects dropout, byte_fallback and word prefixes/suffixes.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized word (raw bytes, non-empty) to `ids`. Thread-safe;
  // results of short words are cached.
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  // Returns the id of a vocabulary string (byte-level text), if present.
  std::optional<int32_t> TokenToId(std::string_view token) const;

  // Vocabulary strings by id; empty where the vocabulary has a hole.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  using WordIds = absl::InlinedVector<int32_t, 6>;

  BpeModel() = default;
  void ApplyMerges(std::string_view word, WordIds* ids) const;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};
  bool ignore_merges_ = false;

  static constexpr size_t kMaxCachedWordBytes = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 18;
  mutable absl::Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, WordIds> cache_ ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_BPE_H_
