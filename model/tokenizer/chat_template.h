// Chat templates written in C++, one per model family, each rendering exactly the string the
// family's Jinja `chat_template` (in tokenizer_config.json) renders for the same messages. No
// Jinja engine: a template we do not recognise is an error that asks for an explicit family.
//   qwen3  : <|im_start|>role\ncontent<|im_end|>\n ... with Qwen3's <think> handling.
//   llama3 : <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
//   plain  : message contents joined by a blank line; no markup (base models, raw prompts).
#ifndef LOCKSTEP_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
#define LOCKSTEP_MODEL_TOKENIZER_CHAT_TEMPLATE_H_

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"

namespace lockstep {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" (Qwen3 only).
  std::string content;
  // Qwen3: the assistant's reasoning, if given separately from `content`.
  std::optional<std::string> reasoning_content;
};

enum class ChatTemplateFamily { kPlain, kQwen3, kLlama3 };

struct ChatTemplateOptions {
  // Append the header that opens the assistant's reply.
  bool add_generation_prompt = true;
  // Qwen3: false appends an empty <think></think> block after the generation prompt.
  bool enable_thinking = true;
  // Llama 3: written before the first message.
  std::string bos_token = "<|begin_of_text|>";
};

// "qwen3", "llama3" or "plain" (the names configs use); anything else is InvalidArgument.
absl::StatusOr<ChatTemplateFamily> ParseChatTemplateFamily(std::string_view name);
std::string_view ChatTemplateFamilyName(ChatTemplateFamily family);

// Recognises the family of a tokenizer_config.json: no chat_template -> plain; Qwen3's ChatML
// with <think> -> qwen3; Llama 3's header template -> llama3. Other templates (Qwen2.5 with its
// default system prompt, Llama 3.1 with its dates, ...) are Unimplemented.
absl::StatusOr<ChatTemplateFamily> DetectChatTemplateFamily(const nlohmann::json& tokenizer_config);

// Reads `model_dir`/tokenizer_config.json and detects its family, unless `override_name` names
// one ("" or "auto" means detect). A missing tokenizer_config.json means plain.
absl::StatusOr<ChatTemplateFamily> ResolveChatTemplateFamily(const std::filesystem::path& model_dir,
                                                             std::string_view override_name);

// Renders `messages`. InvalidArgument for an empty list or a role the family has no markup for.
absl::StatusOr<std::string> RenderChat(ChatTemplateFamily family,
                                       absl::Span<const ChatMessage> messages,
                                       const ChatTemplateOptions& options = {});

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
