#include "model/tokenizer/chat_template.h"

#include "gtest/gtest.h"
#include "model/tokenizer/qwen3_chat_template.h"

namespace lockstep {
namespace {

TEST(ChatTemplateTest, ParsesFamilyNames) {
  EXPECT_EQ(*ParseChatTemplateFamily("qwen3"), ChatTemplateFamily::kQwen3);
  EXPECT_EQ(*ParseChatTemplateFamily("llama3"), ChatTemplateFamily::kLlama3);
  EXPECT_EQ(*ParseChatTemplateFamily("plain"), ChatTemplateFamily::kPlain);
  EXPECT_FALSE(ParseChatTemplateFamily("jinja").ok());
  EXPECT_EQ(ChatTemplateFamilyName(ChatTemplateFamily::kLlama3), "llama3");
}

TEST(ChatTemplateTest, DetectsFamilies) {
  EXPECT_EQ(*DetectChatTemplateFamily({{"chat_template", std::string(kQwen3ChatTemplate)}}),
            ChatTemplateFamily::kQwen3);
  EXPECT_EQ(*DetectChatTemplateFamily(nlohmann::json::object()), ChatTemplateFamily::kPlain);
  EXPECT_EQ(*DetectChatTemplateFamily(
                {{"chat_template", "{{ '<|start_header_id|>' + message['role'] }}"}}),
            ChatTemplateFamily::kLlama3);
  // Qwen2.5's ChatML has no <think> and a default system prompt: not silently treated as Qwen3.
  EXPECT_EQ(DetectChatTemplateFamily({{"chat_template", "<|im_start|>system\nYou are Qwen"}})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

TEST(ChatTemplateTest, OverrideWinsOverDetection) {
  EXPECT_EQ(*ResolveChatTemplateFamily("/nonexistent", "llama3"), ChatTemplateFamily::kLlama3);
  EXPECT_EQ(*ResolveChatTemplateFamily("/nonexistent", "auto"), ChatTemplateFamily::kPlain);
}

TEST(ChatTemplateTest, RejectsEmptyConversationsAndUnknownRoles) {
  EXPECT_FALSE(RenderChat(ChatTemplateFamily::kQwen3, {}).ok());
  std::vector<ChatMessage> messages = {{"developer", "x", std::nullopt}};
  EXPECT_EQ(RenderChat(ChatTemplateFamily::kQwen3, messages).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RenderChat(ChatTemplateFamily::kLlama3, messages).ok());
}

TEST(ChatTemplateTest, Llama3CanOmitGenerationPrompt) {
  std::vector<ChatMessage> messages = {{"user", "hi", std::nullopt}};
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(*RenderChat(ChatTemplateFamily::kLlama3, messages, options),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
}

}  // namespace
}  // namespace lockstep
