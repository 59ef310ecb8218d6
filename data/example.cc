#include "data/example.h"

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

absl::StatusOr<ChatMessage> ParseMessage(const nlohmann::json& object, size_t index) {
  const std::string where = absl::StrCat("messages[", index, "]");
  if (!object.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " is not an object"));
  ChatMessage message;
  for (const auto& [key, value] : object.items()) {
    if (key == "role" || key == "content" || key == "reasoning_content") {
      if (!value.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".", key, " is not a string"));
      }
      if (key == "role") message.role = value.get<std::string>();
      if (key == "content") message.content = value.get<std::string>();
      if (key == "reasoning_content") message.reasoning_content = value.get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, " has unknown key '", key, "'"));
    }
  }
  if (!object.contains("role") || !object.contains("content")) {
    return absl::InvalidArgumentError(absl::StrCat(where, " needs 'role' and 'content'"));
  }
  return message;
}

}  // namespace

absl::StatusOr<Example> ParseExample(const nlohmann::json& object) {
  if (!object.is_object()) return absl::InvalidArgumentError("line is not a JSON object");
  Example example;
  for (const auto& [key, value] : object.items()) {
    if (key == "prompt") {
      if (!value.is_string()) return absl::InvalidArgumentError("'prompt' is not a string");
      example.prompt = value.get<std::string>();
    } else if (key == "messages") {
      if (!value.is_array() || value.empty()) {
        return absl::InvalidArgumentError("'messages' is not a non-empty list");
      }
      for (size_t i = 0; i < value.size(); ++i) {
        absl::StatusOr<ChatMessage> message = ParseMessage(value[i], i);
        if (!message.ok()) return message.status();
        example.messages.push_back(*std::move(message));
      }
    } else if (key == "answer") {
      if (!value.is_string()) return absl::InvalidArgumentError("'answer' is not a string");
      example.answer = value.get<std::string>();
    } else if (key == "metadata") {
      example.metadata = value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown key '", key, "' (extra fields go under 'metadata')"));
    }
  }
  if (example.prompt.has_value() == !example.messages.empty()) {
    return absl::InvalidArgumentError("needs exactly one of 'prompt' and 'messages'");
  }
  return example;
}

absl::StatusOr<std::string> RenderPrompt(const Example& example, ChatTemplateFamily family,
                                         const ChatTemplateOptions& options) {
  if (example.prompt.has_value()) {
    if (family == ChatTemplateFamily::kPlain) return *example.prompt;
    const ChatMessage user{"user", *example.prompt, std::nullopt};
    return RenderChat(family, {&user, 1}, options);
  }
  return RenderChat(family, example.messages, options);
}

}  // namespace lockstep
