#include "data/prompt_format.h"

#include <algorithm>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// The JSON object in `path`, or null when the file does not exist.
absl::StatusOr<nlohmann::json> ReadOptionalJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a JSON object"));
  }
  return json;
}

// The tokens that end a turn of `family`, as the family's tokenizers name them.
std::vector<std::string> EndOfTurnTokens(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::kQwen3:
      return {"<|im_end|>", "<|endoftext|>"};
    case ChatTemplateFamily::kLlama3:
      return {"<|eot_id|>", "<|end_of_text|>"};
    case ChatTemplateFamily::kPlain:
      break;
  }
  return {};
}

// What the family's template writes after a message's end-of-turn token, before the next one.
const char* AfterEndOfTurn(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::kQwen3:
      return "\n";
    case ChatTemplateFamily::kLlama3:
      return "";
    case ChatTemplateFamily::kPlain:
      break;
  }
  return "\n\n";  // RenderChat's plain join
}

// `eos_token_id` of `json` (one integer or a list of them) appended to `ids`.
absl::Status AppendEosIds(const nlohmann::json& json, const fs::path& path,
                          std::vector<int64_t>* ids) {
  if (json.is_null() || !json.contains("eos_token_id") || json["eos_token_id"].is_null()) {
    return absl::OkStatus();
  }
  const nlohmann::json& value = json["eos_token_id"];
  const nlohmann::json list = value.is_array() ? value : nlohmann::json::array({value});
  for (const nlohmann::json& id : list) {
    if (!id.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path.string(), ": eos_token_id must be an integer or a list of integers, got ",
          value.dump()));
    }
    ids->push_back(id.get<int64_t>());
  }
  return absl::OkStatus();
}

// tokenizer_config.json's token fields are a string or {"content": string}.
std::optional<std::string> TokenString(const nlohmann::json& config, const char* key) {
  if (config.is_null() || !config.contains(key)) return std::nullopt;
  const nlohmann::json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

absl::StatusOr<ChatTemplateFamily> Family(const PromptFormatOptions& options,
                                          const nlohmann::json& tokenizer_config,
                                          const fs::path& config_path, std::string* source) {
  if (options.chat_template == "none") {
    *source = "[tokenizer] chat_template = \"none\"";
    return ChatTemplateFamily::kPlain;
  }
  if (options.chat_template != "auto") {
    *source = absl::StrCat("[tokenizer] chat_template = \"", options.chat_template, "\"");
    absl::StatusOr<ChatTemplateFamily> family = ParseChatTemplateFamily(options.chat_template);
    if (family.ok() && *family == ChatTemplateFamily::kPlain) {
      return absl::InvalidArgumentError("[tokenizer] chat_template: use \"none\" for no template");
    }
    return family;
  }
  if (tokenizer_config.is_null()) {
    *source = absl::StrCat("no ", config_path.string());
    return ChatTemplateFamily::kPlain;
  }
  *source = config_path.string();
  absl::StatusOr<ChatTemplateFamily> family = DetectChatTemplateFamily(tokenizer_config);
  if (!family.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_path.string(), ": ", family.status().message(),
        " ([tokenizer] chat_template = \"qwen3\", \"llama3\" or \"none\")"));
  }
  return family;
}

}  // namespace

absl::StatusOr<PromptFormat> ResolvePromptFormat(const fs::path& tokenizer_dir,
                                                 const fs::path& model_dir,
                                                 const Tokenizer& tokenizer,
                                                 const PromptFormatOptions& options) {
  const fs::path tokenizer_config_path = tokenizer_dir / "tokenizer_config.json";
  const fs::path generation_config_path = model_dir / "generation_config.json";
  const fs::path model_config_path = model_dir / "config.json";
  absl::StatusOr<nlohmann::json> tokenizer_config = ReadOptionalJson(tokenizer_config_path);
  if (!tokenizer_config.ok()) return tokenizer_config.status();
  absl::StatusOr<nlohmann::json> generation_config = ReadOptionalJson(generation_config_path);
  if (!generation_config.ok()) return generation_config.status();
  absl::StatusOr<nlohmann::json> model_config = ReadOptionalJson(model_config_path);
  if (!model_config.ok()) return model_config.status();

  PromptFormat format;
  format.apply_to_plain_prompts = options.apply_to_plain_prompts;
  format.template_options.enable_thinking = options.enable_thinking;
  absl::StatusOr<ChatTemplateFamily> family =
      Family(options, *tokenizer_config, tokenizer_config_path, &format.template_source);
  if (!family.ok()) return family.status();
  format.family = *family;
  if (std::optional<std::string> bos = TokenString(*tokenizer_config, "bos_token")) {
    format.template_options.bos_token = *bos;
  }

  // The model's embedding must cover every id the tokenizer can produce.
  if (!model_config->is_null() && model_config->contains("vocab_size") &&
      (*model_config)["vocab_size"].is_number_integer()) {
    const int64_t vocab_size = (*model_config)["vocab_size"].get<int64_t>();
    if (tokenizer.vocab_size() > vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          tokenizer_dir.string(), ": the tokenizer has ", tokenizer.vocab_size(),
          " ids, more than the model's embedding (vocab_size ", vocab_size, " in ",
          model_config_path.string(), ")"));
    }
  }

  std::vector<std::pair<int64_t, std::string>> candidates;  // id, where it came from
  for (const std::string& token : EndOfTurnTokens(format.family)) {
    if (std::optional<int32_t> id = tokenizer.TokenToId(token)) {
      candidates.push_back({*id, format.template_source});
    }
  }
  for (const auto& [json, path] : {std::pair{&*generation_config, &generation_config_path},
                                   std::pair{&*model_config, &model_config_path}}) {
    std::vector<int64_t> ids;
    if (absl::Status s = AppendEosIds(*json, *path, &ids); !s.ok()) return s;
    for (int64_t id : ids) candidates.push_back({id, path->string()});
  }
  if (std::optional<std::string> eos = TokenString(*tokenizer_config, "eos_token")) {
    std::optional<int32_t> id = tokenizer.TokenToId(*eos);
    if (!id.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(tokenizer_config_path.string(),
                                                     ": eos_token '", *eos,
                                                     "' is not in the tokenizer's vocabulary"));
    }
    candidates.push_back({*id, tokenizer_config_path.string()});
  }
  for (const auto& [id, source] : candidates) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": eos token id ", id,
                                                     " is outside the tokenizer's ",
                                                     tokenizer.vocab_size(), " ids"));
    }
    const int32_t id32 = static_cast<int32_t>(id);
    if (std::find(format.stop_token_ids.begin(), format.stop_token_ids.end(), id32) ==
        format.stop_token_ids.end()) {
      format.stop_token_ids.push_back(id32);
    }
  }
  return format;
}

std::string DescribePromptFormat(const PromptFormat& format, const Tokenizer& tokenizer) {
  std::string stops;
  for (int32_t id : format.stop_token_ids) {
    if (!stops.empty()) stops += ", ";
    absl::StrAppend(&stops, id);
    absl::StatusOr<std::string_view> token = tokenizer.IdToToken(id);
    if (token.ok()) absl::StrAppend(&stops, " ", std::string(*token));
  }
  return absl::StrCat("chat template ", std::string(ChatTemplateFamilyName(format.family)), " (",
                      format.template_source, "), plain prompts ",
                      format.apply_to_plain_prompts ? "templated" : "raw", ", stop tokens [",
                      stops, "]");
}

absl::StatusOr<std::string> PromptText(const Example& example, const PromptFormat& format) {
  if (example.prompt.has_value() && !format.apply_to_plain_prompts) return *example.prompt;
  return RenderPrompt(example, format.family, format.template_options);
}

absl::StatusOr<std::string> ObservationText(const ChatMessage& message, const PromptFormat& format) {
  ChatTemplateOptions options = format.template_options;
  options.add_generation_prompt = true;
  options.bos_token.clear();  // mid-conversation
  absl::StatusOr<std::string> rendered =
      RenderChat(format.family, absl::MakeConstSpan(&message, 1), options);
  if (!rendered.ok()) return rendered.status();
  return absl::StrCat(AfterEndOfTurn(format.family), *rendered);
}

}  // namespace lockstep
