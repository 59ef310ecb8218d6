#include "model/tokenizer/bpe.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/byte_level.h"

namespace lockstep {
namespace {

// Splits one entry of `merges`: ["a", "b"] (newer files) or "a b" (older files).
absl::StatusOr<std::pair<std::string, std::string>> ParseMerge(const nlohmann::json& merge) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return std::make_pair(merge[0].get<std::string>(), merge[1].get<std::string>());
  }
  if (merge.is_string()) {
    const std::string& text = merge.get_ref<const std::string&>();
    size_t space = text.find(' ');
    if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos) {
      return std::make_pair(text.substr(0, space), text.substr(space + 1));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("bad BPE merge entry: ", merge.dump()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model) {
  if (model.value("type", "") != "BPE") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer model type '", model.value("type", ""), "' (only BPE)"));
  }
  const auto is_set = [&](const char* key) {
    return model.contains(key) && !model[key].is_null() && model[key] != "" && model[key] != false;
  };
  for (const char* key : {"dropout", "byte_fallback", "continuing_subword_prefix",
                          "end_of_word_suffix"}) {
    if (is_set(key)) return absl::UnimplementedError(absl::StrCat("BPE option '", key, "'"));
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  bpe->ignore_merges_ = model.value("ignore_merges", false);
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object() || vocab_it->empty()) {
    return absl::InvalidArgumentError("BPE vocab is missing or empty");
  }
  const nlohmann::json& vocab = *vocab_it;
  bpe->token_to_id_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > (1 << 30)) {
      return absl::InvalidArgumentError(absl::StrCat("bad id for vocab entry '", token, "'"));
    }
    const int32_t id = id_json.get<int32_t>();
    bpe->token_to_id_[token] = id;
    if (static_cast<size_t>(id) >= bpe->id_to_token_.size()) bpe->id_to_token_.resize(id + 1);
    bpe->id_to_token_[id] = token;
  }
  for (int byte = 0; byte < 256; ++byte) {
    std::optional<int32_t> id = bpe->TokenToId(ByteToUnicode(byte));
    if (!id.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("byte-level vocab lacks the token for byte ", byte));
    }
    bpe->byte_ids_[byte] = *id;
  }
  static const nlohmann::json kNoMerges = nlohmann::json::array();
  auto merges_it = model.find("merges");
  const nlohmann::json& merges = merges_it != model.end() ? *merges_it : kNoMerges;
  bpe->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    absl::StatusOr<std::pair<std::string, std::string>> merge = ParseMerge(merges[rank]);
    if (!merge.ok()) return merge.status();
    std::optional<int32_t> left = bpe->TokenToId(merge->first);
    std::optional<int32_t> right = bpe->TokenToId(merge->second);
    std::optional<int32_t> merged = bpe->TokenToId(merge->first + merge->second);
    if (!left || !right || !merged) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE merge ", rank, " uses a token missing from the vocab: ",
                       merges[rank].dump()));
    }
    // The first occurrence of a pair wins, as in Hugging Face tokenizers.
    bpe->merges_.try_emplace(PairKey(*left, *right),
                             Merge{static_cast<int32_t>(rank), *merged});
  }
  return bpe;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(absl::string_view(token.data(), token.size()));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    auto it = cache_.find(absl::string_view(word.data(), word.size()));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  WordIds word_ids;
  ApplyMerges(word, &word_ids);
  ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();  // Crude bound; refills quickly.
    cache_.emplace(word, std::move(word_ids));
  }
}

void BpeModel::ApplyMerges(std::string_view word, WordIds* ids) const {
  if (word.size() == 1) {
    ids->push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges_) {  // A word that is itself a token skips the merges (Llama 3).
    std::string token;
    AppendByteLevelEncoded(word, &token);
    if (std::optional<int32_t> id = TokenToId(token)) {
      ids->push_back(*id);
      return;
    }
  }
  // Symbols form a doubly linked list; a heap holds candidate merges ordered by (rank, left
  // position). A popped candidate is stale if either side was merged away or changed since.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  const int32_t num_symbols = static_cast<int32_t>(word.size());
  absl::InlinedVector<Symbol, 32> symbols(num_symbols);
  for (int32_t i = 0; i < num_symbols; ++i) {
    symbols[i] = Symbol{byte_ids_[static_cast<uint8_t>(word[i])], i - 1,
                        i + 1 < num_symbols ? i + 1 : -1, true};
  }
  std::vector<Candidate> heap_storage;
  heap_storage.reserve(num_symbols * 2);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap(
      std::greater<Candidate>(), std::move(heap_storage));
  const auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    heap.push(Candidate{it->second.rank, left, right, symbols[left].id, symbols[right].id,
                        it->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < num_symbols; ++i) push_pair(i);
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.left];
    if (!left.alive || left.next != top.right || left.id != top.left_id ||
        symbols[top.right].id != top.right_id || !symbols[top.right].alive) {
      continue;
    }
    Symbol& right = symbols[top.right];
    left.id = top.merged_id;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    push_pair(left.prev);
    push_pair(top.left);
  }
  for (int32_t i = 0; i >= 0 && i < num_symbols; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace lockstep
