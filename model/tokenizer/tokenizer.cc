#include "model/tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/utf8.h"

namespace lockstep {
namespace {

const nlohmann::json& Field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// The ByteLevel decoder's view of a token: characters of the byte alphabet become their bytes,
// any other character is kept as its own UTF-8 (what Hugging Face's ByteLevel decoder does).
std::string ByteLevelTokenBytes(std::string_view token) {
  std::string bytes;
  size_t i = 0;
  while (i < token.size()) {
    int length = Utf8CharLength(token.substr(i));
    if (length <= 0) length = 1;
    std::string_view character = token.substr(i, length);
    if (!AppendByteLevelDecoded(character, &bytes)) bytes.append(character);
    i += length;
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(file)) file /= "tokenizer.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", file.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = FromJsonString(buffer.str());
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(file.string(), ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonString(std::string_view json_text) {
  nlohmann::json root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("tokenizer.json is not a JSON object");
  }
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  absl::StatusOr<std::unique_ptr<BpeModel>> bpe = BpeModel::FromJson(Field(root, "model"));
  if (!bpe.ok()) return bpe.status();
  tokenizer->bpe_ = *std::move(bpe);
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre_tokenizer =
      PreTokenizer::FromJson(Field(root, "pre_tokenizer"));
  if (!pre_tokenizer.ok()) return pre_tokenizer.status();
  if (!(*pre_tokenizer)->byte_level()) {
    return absl::UnimplementedError("only byte-level BPE (a ByteLevel pre_tokenizer) is supported");
  }
  tokenizer->pre_tokenizer_ = *std::move(pre_tokenizer);
  absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(Field(root, "normalizer"));
  if (!normalizer.ok()) return normalizer.status();
  tokenizer->normalizer_ = *normalizer;
  const nlohmann::json& decoder = Field(root, "decoder");
  if (!decoder.is_null() && decoder.value("type", "") != "ByteLevel") {
    return absl::UnimplementedError(
        absl::StrCat("decoder '", decoder.value("type", ""), "' is not supported"));
  }
  absl::StatusOr<AddedVocabulary> added = AddedVocabulary::FromJson(Field(root, "added_tokens"));
  if (!added.ok()) return added.status();
  tokenizer->added_ = *std::move(added);

  // Byte strings by id: vocab entries through the byte-level alphabet, added tokens verbatim.
  const std::vector<std::string>& vocab = tokenizer->bpe_->id_to_token();
  size_t num_ids = vocab.size();
  for (const AddedToken& token : tokenizer->added_.tokens()) {
    num_ids = std::max(num_ids, static_cast<size_t>(token.id) + 1);
  }
  tokenizer->token_bytes_.resize(num_ids);
  tokenizer->valid_id_.assign(num_ids, false);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty()) continue;
    tokenizer->token_bytes_[id] = ByteLevelTokenBytes(vocab[id]);
    tokenizer->valid_id_[id] = true;
  }
  for (const AddedToken& token : tokenizer->added_.tokens()) {
    tokenizer->token_bytes_[token.id] = token.content;
    tokenizer->valid_id_[token.id] = true;
  }
  return tokenizer;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<AddedVocabulary::Segment> segments;
  added_.Split(text, &segments);
  for (const AddedVocabulary::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else if (absl::Status status = EncodeSection(segment.text, &ids); !status.ok()) {
      return status;
    }
  }
  return ids;
}

absl::Status Tokenizer::EncodeSection(std::string_view text, std::vector<int32_t>* ids) const {
  std::string normalized_storage;
  absl::StatusOr<std::string_view> normalized = normalizer_.Normalize(text, &normalized_storage);
  if (!normalized.ok()) return normalized.status();
  std::vector<std::string_view> pieces;
  if (absl::Status status = pre_tokenizer_->Split(*normalized, &pieces); !status.ok()) {
    return status;
  }
  for (std::string_view piece : pieces) bpe_->EncodeWord(piece, ids);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::string text;
  for (int32_t id : ids) {
    absl::StatusOr<std::string_view> bytes = TokenBytes(id);
    if (!bytes.ok()) return bytes.status();
    if (skip_special_tokens && IsSpecial(id)) continue;
    text.append(*bytes);
  }
  return text;
}

absl::StatusOr<std::string_view> Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !valid_id_[id]) {
    return absl::OutOfRangeError(absl::StrCat("token id ", id, " is not in the vocabulary"));
  }
  return std::string_view(token_bytes_[id]);
}

absl::StatusOr<std::string_view> Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_.FindById(id)) return std::string_view(added->content);
  const std::vector<std::string>& vocab = bpe_->id_to_token();
  if (id < 0 || static_cast<size_t>(id) >= vocab.size() || vocab[id].empty()) {
    return absl::OutOfRangeError(absl::StrCat("token id ", id, " is not in the vocabulary"));
  }
  return std::string_view(vocab[id]);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (int32_t id = added_.FindByContent(token); id >= 0) return id;
  return bpe_->TokenToId(token);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* added = added_.FindById(id);
  return added != nullptr && added->special;
}

}  // namespace lockstep
