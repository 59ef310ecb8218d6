#include "model/tokenizer/chat_template.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// absl::StrAppend takes absl::string_view, which Debian's Abseil keeps distinct from std's.
void Append(std::string* out, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) out->append(part);
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}
bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n').
std::string_view LstripNewlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view RstripNewlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// Length of the Python-whitespace character (str.isspace) at the start or end of `s`, or 0.
size_t LeadingSpaceLength(std::string_view s) {
  static constexpr std::string_view kMultiByte[] = {
      "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF",
      "\xE2\x81\x9F", "\xE3\x80\x80"};
  if (s.empty()) return 0;
  unsigned char c = s[0];
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  if (s.size() >= 3 && c == 0xE2 && static_cast<unsigned char>(s[1]) == 0x80 &&
      static_cast<unsigned char>(s[2]) >= 0x80 && static_cast<unsigned char>(s[2]) <= 0x8A) {
    return 3;  // U+2000..U+200A.
  }
  for (std::string_view space : kMultiByte) {
    if (StartsWith(s, space)) return space.size();
  }
  return 0;
}
size_t TrailingSpaceLength(std::string_view s) {
  for (size_t length = 1; length <= 3 && length <= s.size(); ++length) {
    std::string_view tail = s.substr(s.size() - length);
    if ((static_cast<unsigned char>(tail[0]) & 0xC0) == 0x80) continue;  // Not a lead byte.
    return LeadingSpaceLength(tail) == length ? length : 0;
  }
  return 0;
}
// Jinja's `trim` filter: Python's str.strip() with no argument.
std::string_view PythonStrip(std::string_view s) {
  while (size_t n = LeadingSpaceLength(s)) s.remove_prefix(n);
  while (size_t n = TrailingSpaceLength(s)) s.remove_suffix(n);
  return s;
}

// Python's text.split(separator)[0] and [-1].
std::string_view BeforeFirst(std::string_view text, std::string_view separator) {
  size_t at = text.find(separator);
  return at == std::string_view::npos ? text : text.substr(0, at);
}
std::string_view AfterLast(std::string_view text, std::string_view separator) {
  size_t at = text.rfind(separator);
  return at == std::string_view::npos ? text : text.substr(at + separator.size());
}

absl::Status UnknownRole(std::string_view family, std::string_view role) {
  return absl::InvalidArgumentError(
      absl::StrCat("the ", std::string(family), " chat template has no role '", std::string(role),
                   "'"));
}

// Qwen3's tokenizer_config.json chat_template without tools, statement by statement.
absl::StatusOr<std::string> RenderQwen3(absl::Span<const ChatMessage> messages,
                                        const ChatTemplateOptions& options) {
  const int num_messages = static_cast<int>(messages.size());
  std::string out;
  if (messages[0].role == "system") {
    Append(&out, {"<|im_start|>system\n", messages[0].content, "<|im_end|>\n"});
  }
  // The last user message that is not a tool response ends the "query"; assistant turns after
  // it keep their reasoning.
  int last_query_index = num_messages - 1;
  for (int i = num_messages - 1; i >= 0; --i) {
    const std::string& content = messages[i].content;
    if (messages[i].role == "user" &&
        !(StartsWith(content, "<tool_response>") && EndsWith(content, "</tool_response>"))) {
      last_query_index = i;
      break;
    }
  }
  for (int i = 0; i < num_messages; ++i) {
    const ChatMessage& message = messages[i];
    if (message.role == "user" || (message.role == "system" && i != 0)) {
      Append(&out, {"<|im_start|>", message.role, "\n", message.content, "<|im_end|>\n"});
    } else if (message.role == "assistant") {
      std::string_view content = message.content;
      std::string_view reasoning;
      if (message.reasoning_content.has_value()) {
        reasoning = *message.reasoning_content;
      } else if (Contains(content, "</think>")) {
        reasoning = LstripNewlines(
            AfterLast(RstripNewlines(BeforeFirst(message.content, "</think>")), "<think>"));
        content = LstripNewlines(AfterLast(message.content, "</think>"));
      }
      const bool is_last = i == num_messages - 1;
      if (i > last_query_index && (is_last || !reasoning.empty())) {
        Append(&out, {"<|im_start|>assistant\n<think>\n",
                        RstripNewlines(LstripNewlines(reasoning)), "\n</think>\n\n",
                        LstripNewlines(content)});
      } else {
        Append(&out, {"<|im_start|>assistant\n", content});
      }
      out.append("<|im_end|>\n");
    } else if (message.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out.append("<|im_start|>user");
      Append(&out, {"\n<tool_response>\n", message.content, "\n</tool_response>"});
      if (i == num_messages - 1 || messages[i + 1].role != "tool") out.append("<|im_end|>\n");
    } else if (message.role != "system") {
      return UnknownRole("qwen3", message.role);
    }
  }
  if (options.add_generation_prompt) {
    out.append("<|im_start|>assistant\n");
    if (!options.enable_thinking) out.append("<think>\n\n</think>\n\n");
  }
  return out;
}

// Llama 3's chat_template. Meta's base file appends the assistant header unconditionally; the
// Instruct file appends it only with add_generation_prompt. Both agree when it is true.
absl::StatusOr<std::string> RenderLlama3(absl::Span<const ChatMessage> messages,
                                         const ChatTemplateOptions& options) {
  std::string out = options.bos_token;
  for (const ChatMessage& message : messages) {
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      return UnknownRole("llama3", message.role);
    }
    Append(&out, {"<|start_header_id|>", message.role, "<|end_header_id|>\n\n",
                    PythonStrip(message.content), "<|eot_id|>"});
  }
  if (options.add_generation_prompt) out.append("<|start_header_id|>assistant<|end_header_id|>\n\n");
  return out;
}

std::string RenderPlain(absl::Span<const ChatMessage> messages) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0) out.append("\n\n");
    out.append(messages[i].content);
  }
  return out;
}

}  // namespace

absl::StatusOr<ChatTemplateFamily> ParseChatTemplateFamily(std::string_view name) {
  if (name == "qwen3") return ChatTemplateFamily::kQwen3;
  if (name == "llama3") return ChatTemplateFamily::kLlama3;
  if (name == "plain") return ChatTemplateFamily::kPlain;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown chat template '", std::string(name), "' (expected qwen3, llama3, plain or auto)"));
}

std::string_view ChatTemplateFamilyName(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::kQwen3:
      return "qwen3";
    case ChatTemplateFamily::kLlama3:
      return "llama3";
    case ChatTemplateFamily::kPlain:
      break;
  }
  return "plain";
}

absl::StatusOr<ChatTemplateFamily> DetectChatTemplateFamily(const nlohmann::json& tokenizer_config) {
  auto it = tokenizer_config.find("chat_template");
  if (it == tokenizer_config.end() || it->is_null()) return ChatTemplateFamily::kPlain;
  if (!it->is_string()) {
    return absl::UnimplementedError("chat_template is not a single string; name the family");
  }
  const std::string& jinja = it->get_ref<const std::string&>();
  if (Contains(jinja, "<|im_start|>") && Contains(jinja, "</think>") &&
      Contains(jinja, "last_query_index")) {
    return ChatTemplateFamily::kQwen3;
  }
  if (Contains(jinja, "<|start_header_id|>") && !Contains(jinja, "Cutting Knowledge Date")) {
    return ChatTemplateFamily::kLlama3;
  }
  return absl::UnimplementedError(
      "unrecognised chat_template in tokenizer_config.json; set the chat template family "
      "(qwen3, llama3 or plain) explicitly");
}

absl::StatusOr<ChatTemplateFamily> ResolveChatTemplateFamily(const std::filesystem::path& model_dir,
                                                             std::string_view override_name) {
  if (!override_name.empty() && override_name != "auto") {
    return ParseChatTemplateFamily(override_name);
  }
  const std::filesystem::path path = model_dir / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return ChatTemplateFamily::kPlain;
  nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a JSON object"));
  }
  return DetectChatTemplateFamily(config);
}

absl::StatusOr<std::string> RenderChat(ChatTemplateFamily family,
                                       absl::Span<const ChatMessage> messages,
                                       const ChatTemplateOptions& options) {
  if (messages.empty()) return absl::InvalidArgumentError("cannot render an empty conversation");
  switch (family) {
    case ChatTemplateFamily::kQwen3:
      return RenderQwen3(messages, options);
    case ChatTemplateFamily::kLlama3:
      return RenderLlama3(messages, options);
    case ChatTemplateFamily::kPlain:
      break;
  }
  return RenderPlain(messages);
}

}  // namespace lockstep
