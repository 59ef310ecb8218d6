#include "data/example.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

// The member at `field`: the key itself, else the dotted path through nested objects.
const nlohmann::json* FindField(const nlohmann::json& object, const std::string& field) {
  if (field.empty()) return nullptr;
  if (auto it = object.find(field); it != object.end()) return it->is_null() ? nullptr : &*it;
  const nlohmann::json* at = &object;
  for (absl::string_view part : absl::StrSplit(field, '.')) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(std::string(part));
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at->is_null() ? nullptr : at;
}

}  // namespace

absl::StatusOr<Example> ParseExample(const nlohmann::json& object, const DatasetFields& fields) {
  if (!object.is_object()) return absl::InvalidArgumentError("line is not a JSON object");
  Example example;
  const nlohmann::json* prompt = FindField(object, fields.prompt_field);
  const bool default_prompt = fields.prompt_field == DatasetFields().prompt_field;
  const nlohmann::json* messages =
      default_prompt && object.contains("messages") ? &object.at("messages") : nullptr;
  if (prompt != nullptr && messages != nullptr) {
    return absl::InvalidArgumentError("needs exactly one of 'prompt' and 'messages'");
  }
  if (prompt == nullptr && messages == nullptr) {
    return absl::InvalidArgumentError(
        default_prompt ? std::string("needs exactly one of 'prompt' and 'messages'")
                       : absl::StrCat("missing field '", fields.prompt_field,
                                      "' (data.prompt_field)"));
  }
  const std::string prompt_name = prompt != nullptr ? fields.prompt_field : "messages";
  const nlohmann::json& value = prompt != nullptr ? *prompt : *messages;
  if (value.is_string()) {
    example.prompt = value.get<std::string>();
  } else if (value.is_array() && !value.empty()) {
    for (size_t i = 0; i < value.size(); ++i) {
      absl::StatusOr<ChatMessage> message = ParseMessage(value[i], i);
      if (!message.ok()) return message.status();
      example.messages.push_back(*std::move(message));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", prompt_name, "' is neither a string nor a non-empty list of messages"));
  }
  const bool default_answer = fields.answer_field == DatasetFields().answer_field;
  if (const nlohmann::json* answer = FindField(object, fields.answer_field); answer != nullptr) {
    if (!answer->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("'", fields.answer_field, "' is not a string"));
    }
    example.answer = answer->get<std::string>();
  } else if (!default_answer) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing field '", fields.answer_field, "' (data.answer_field)"));
  }
  // Everything else travels to the rewards as metadata.
  nlohmann::json metadata = object.contains("metadata") ? object.at("metadata") : nlohmann::json();
  for (const auto& [key, member] : object.items()) {
    if (key == "metadata" || key == prompt_name || key == fields.answer_field) continue;
    if (!metadata.is_null() && !metadata.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'metadata' is not an object, so the extra field '", key, "' has nowhere to go"));
    }
    if (!metadata.contains(key)) metadata[key] = member;
  }
  example.metadata = std::move(metadata);
  return example;
}

std::map<std::string, std::string> MetadataStrings(const Example& example) {
  std::map<std::string, std::string> metadata;
  if (example.metadata.is_object()) {
    for (const auto& [key, value] : example.metadata.items()) {
      metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  return metadata;
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
