#include "model/tokenizer/byte_tokenizer_writer.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/qwen3_chat_template.h"

namespace lockstep {
namespace {

struct SpecialToken {
  int32_t id;
  const char* content;
  bool special;
};
constexpr SpecialToken kAddedTokens[] = {
    {kByteTokenizerEndOfTextId, "<|endoftext|>", true},
    {kByteTokenizerImStartId, "<|im_start|>", true},
    {kByteTokenizerImEndId, "<|im_end|>", true},
    {259, "<think>", false},
    {260, "</think>", false},
};

nlohmann::json AddedTokenJson(const SpecialToken& token, bool with_id) {
  nlohmann::json entry = {{"content", token.content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false},          {"normalized", false},  {"special", token.special}};
  if (with_id) entry["id"] = token.id;
  return entry;
}

nlohmann::json ByteLevelStep() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
          {"use_regex", false}};
}

absl::Status WriteJson(const std::filesystem::path& path, const nlohmann::json& document) {
  // Write then rename, so a crash never leaves a half-written tokenizer behind.
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary.string()));
    out << document.dump(2) << "\n";
    if (!out.flush()) return absl::DataLossError(absl::StrCat("write failed: ", temporary.string()));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot rename to ", path.string(), ": ",
                                               error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

nlohmann::json ByteLevelTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[ByteToUnicode(byte)] = byte;
  nlohmann::json added = nlohmann::json::array();
  for (const SpecialToken& token : kAddedTokens) added.push_back(AddedTokenJson(token, true));
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", ByteLevelStep()},
          {"post_processor", ByteLevelStep()},
          {"decoder", ByteLevelStep()},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", nlohmann::json::array()}}}};
}

nlohmann::json ByteLevelTokenizerConfigJson() {
  nlohmann::json added_tokens_decoder = nlohmann::json::object();
  for (const SpecialToken& token : kAddedTokens) {
    added_tokens_decoder[std::to_string(token.id)] = AddedTokenJson(token, false);
  }
  return {{"add_bos_token", false},
          {"add_prefix_space", false},
          {"added_tokens_decoder", added_tokens_decoder},
          {"additional_special_tokens", {"<|im_start|>", "<|im_end|>"}},
          {"bos_token", nullptr},
          {"chat_template", std::string(kQwen3ChatTemplate)},
          {"clean_up_tokenization_spaces", false},
          {"eos_token", "<|im_end|>"},
          {"errors", "replace"},
          {"pad_token", "<|endoftext|>"},
          {"split_special_tokens", false},
          {"tokenizer_class", "PreTrainedTokenizerFast"},
          {"unk_token", nullptr}};
}

absl::Status WriteByteLevelTokenizerFiles(const std::filesystem::path& model_dir) {
  if (!std::filesystem::is_directory(model_dir)) {
    return absl::NotFoundError(absl::StrCat("model directory ", model_dir.string(), " not found"));
  }
  absl::Status status = WriteJson(model_dir / "tokenizer.json", ByteLevelTokenizerJson());
  if (status.ok()) {
    status = WriteJson(model_dir / "tokenizer_config.json", ByteLevelTokenizerConfigJson());
  }
  return status;
}

}  // namespace lockstep
