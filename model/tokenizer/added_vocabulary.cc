#include "model/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::StatusOr<AddedVocabulary> AddedVocabulary::FromJson(const nlohmann::json& added_tokens) {
  AddedVocabulary vocabulary;
  if (added_tokens.is_null()) return vocabulary;
  if (!added_tokens.is_array()) return absl::InvalidArgumentError("added_tokens must be a list");
  for (const nlohmann::json& entry : added_tokens) {
    AddedToken token;
    if (!entry.contains("id") || !entry["id"].is_number_integer() || !entry.contains("content") ||
        !entry["content"].is_string() || entry["content"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bad added token: ", entry.dump()));
    }
    token.id = entry["id"].get<int32_t>();
    token.content = entry["content"].get<std::string>();
    token.special = entry.value("special", false);
    for (const char* option : {"lstrip", "rstrip", "single_word"}) {
      if (entry.value(option, false)) {
        return absl::UnimplementedError(
            absl::StrCat("added token '", token.content, "' uses ", option, "=true"));
      }
    }
    vocabulary.index_by_id_[token.id] = vocabulary.tokens_.size();
    vocabulary.tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < vocabulary.tokens_.size(); ++i) {
    uint8_t first = static_cast<uint8_t>(vocabulary.tokens_[i].content[0]);
    vocabulary.by_first_byte_[first].push_back(i);
  }
  for (std::vector<size_t>& bucket : vocabulary.by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
      return vocabulary.tokens_[a].content.size() > vocabulary.tokens_[b].content.size();
    });
  }
  return vocabulary;
}

void AddedVocabulary::Split(std::string_view text, std::vector<Segment>* segments) const {
  size_t plain_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const std::vector<size_t>& bucket = by_first_byte_[static_cast<uint8_t>(text[i])];
    const AddedToken* match = nullptr;
    for (size_t index : bucket) {
      const std::string& content = tokens_[index].content;
      if (text.compare(i, content.size(), content) == 0) {
        match = &tokens_[index];
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > plain_start) segments->push_back({text.substr(plain_start, i - plain_start), -1});
    segments->push_back({text.substr(i, match->content.size()), match->id});
    i += match->content.size();
    plain_start = i;
  }
  if (plain_start < text.size()) segments->push_back({text.substr(plain_start), -1});
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

int32_t AddedVocabulary::FindByContent(std::string_view content) const {
  if (content.empty()) return -1;
  for (size_t index : by_first_byte_[static_cast<uint8_t>(content[0])]) {
    if (tokens_[index].content == content) return tokens_[index].id;
  }
  return -1;
}

}  // namespace lockstep
