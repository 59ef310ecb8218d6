// The prompt format read from a model directory: chat template family (Qwen3 / Llama 3
// recognised, an unknown one an error naming the file), the override names, stop tokens from
// the template and every eos source (one id or a list), Qwen3's thinking switch, plain prompts
// templated or raw, the vocabulary-larger-than-embedding check, and how a multi-turn episode's
// observation continues the conversation.
#include "data/prompt_format.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/byte_tokenizer_writer.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void WriteJson(const fs::path& path, const nlohmann::json& json) {
  std::ofstream(path) << json.dump(2) << "\n";
}

// Llama 3's chat_template (Meta-Llama-3-8B-Instruct's tokenizer_config.json).
constexpr char kLlama3Template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

class PromptFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("prompt_format_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // The tiny models' byte-level tokenizer (Qwen3 markup, eos <|im_end|>) and a config.json.
  void WriteQwen3Shaped(int64_t vocab_size = 512) {
    ASSERT_TRUE(WriteByteLevelTokenizerFiles(dir_).ok());
    WriteJson(dir_ / "config.json", {{"vocab_size", vocab_size}, {"eos_token_id", 258}});
  }

  // The same byte-level vocabulary with Llama 3's special tokens and chat template.
  void WriteLlama3Shaped() {
    nlohmann::json tokenizer = ByteLevelTokenizerJson();
    const char* names[] = {"<|end_of_text|>", "<|begin_of_text|>", "<|eot_id|>",
                           "<|start_header_id|>", "<|end_header_id|>"};
    for (int i = 0; i < 5; ++i) {
      tokenizer["added_tokens"][i]["content"] = names[i];
      tokenizer["added_tokens"][i]["special"] = true;
    }
    WriteJson(dir_ / "tokenizer.json", tokenizer);
    nlohmann::json config = ByteLevelTokenizerConfigJson();
    config["chat_template"] = kLlama3Template;
    config["bos_token"] = "<|begin_of_text|>";
    config["eos_token"] = "<|eot_id|>";
    config.erase("added_tokens_decoder");
    WriteJson(dir_ / "tokenizer_config.json", config);
    WriteJson(dir_ / "config.json", {{"vocab_size", 512}, {"eos_token_id", 256}});
    WriteJson(dir_ / "generation_config.json", {{"eos_token_id", {256, 258}}});
  }

  absl::StatusOr<PromptFormat> Resolve(const PromptFormatOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(dir_);
    if (!tokenizer.ok()) return tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    return ResolvePromptFormat(dir_, dir_, *tokenizer_, options);
  }

  fs::path dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

Example Plain(const std::string& prompt) {
  Example example;
  example.prompt = prompt;
  return example;
}

TEST_F(PromptFormatTest, Qwen3IsRecognisedWithItsStopsAndThinkingSwitch) {
  WriteQwen3Shaped();
  absl::StatusOr<PromptFormat> format = Resolve();
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->family, ChatTemplateFamily::kQwen3);
  EXPECT_EQ(format->template_source, (dir_ / "tokenizer_config.json").string());
  // <|im_end|> then <|endoftext|> (the template's), config.json's 258 already listed.
  EXPECT_THAT(format->stop_token_ids, ElementsAre(258, 256));
  EXPECT_EQ(*PromptText(Plain("2+2?"), *format),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  PromptFormatOptions no_thinking;
  no_thinking.enable_thinking = false;
  EXPECT_EQ(*PromptText(Plain("2+2?"), *Resolve(no_thinking)),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  PromptFormatOptions raw;
  raw.apply_to_plain_prompts = false;
  EXPECT_EQ(*PromptText(Plain("2+2?"), *Resolve(raw)), "2+2?");
}

TEST_F(PromptFormatTest, Llama3IsRecognisedAndStopsOnEotFromEveryEosSource) {
  WriteLlama3Shaped();
  absl::StatusOr<PromptFormat> format = Resolve();
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->family, ChatTemplateFamily::kLlama3);
  // <|eot_id|> (258) first: SFT ends answers with it; then <|end_of_text|> (256); the eos list of
  // generation_config.json adds nothing new.
  EXPECT_THAT(format->stop_token_ids, ElementsAre(258, 256));
  Example chat;
  chat.messages = {{"system", "Be brief.", std::nullopt}, {"user", " Hi ", std::nullopt}};
  EXPECT_EQ(*PromptText(chat, *format),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  std::vector<int32_t> ids = *tokenizer_->Encode(*PromptText(chat, *format));
  EXPECT_EQ(ids.front(), 257);  // <|begin_of_text|> is one token
}

TEST_F(PromptFormatTest, OneEosIdOrAListFromGenerationConfig) {
  WriteQwen3Shaped();
  PromptFormatOptions none;
  none.chat_template = "none";
  WriteJson(dir_ / "generation_config.json", {{"eos_token_id", 259}});
  EXPECT_THAT(Resolve(none)->stop_token_ids, ElementsAre(259, 258));
  WriteJson(dir_ / "generation_config.json", {{"eos_token_id", {260, 259}}});
  EXPECT_THAT(Resolve(none)->stop_token_ids, ElementsAre(260, 259, 258));
  WriteJson(dir_ / "generation_config.json", {{"eos_token_id", "x"}});
  absl::StatusOr<PromptFormat> bad = Resolve(none);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr((dir_ / "generation_config.json").string() + ": eos_token_id must be"));
  WriteJson(dir_ / "generation_config.json", {{"eos_token_id", 9999}});
  EXPECT_THAT(std::string(Resolve(none).status().message()),
              HasSubstr("generation_config.json: eos token id 9999 is outside"));
}

TEST_F(PromptFormatTest, TheConfigNamesOverrideDetection) {
  WriteQwen3Shaped();
  PromptFormatOptions options;
  options.chat_template = "llama3";
  absl::StatusOr<PromptFormat> llama = Resolve(options);
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->family, ChatTemplateFamily::kLlama3);
  EXPECT_EQ(llama->template_source, "[tokenizer] chat_template = \"llama3\"");
  options.chat_template = "none";
  absl::StatusOr<PromptFormat> none = Resolve(options);
  EXPECT_EQ(none->family, ChatTemplateFamily::kPlain);
  EXPECT_EQ(*PromptText(Plain("2+2?"), *none), "2+2?");
  options.chat_template = "mistral";
  EXPECT_EQ(Resolve(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PromptFormatTest, AnUnknownTemplateIsAnErrorNamingTheFileNeverQwen3) {
  WriteQwen3Shaped();
  nlohmann::json config = ByteLevelTokenizerConfigJson();
  config["chat_template"] = "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}";
  WriteJson(dir_ / "tokenizer_config.json", config);
  absl::StatusOr<PromptFormat> format = Resolve();
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(format.status().message());
  EXPECT_THAT(message, HasSubstr((dir_ / "tokenizer_config.json").string() + ": unrecognised"));
  EXPECT_THAT(message, HasSubstr("[tokenizer] chat_template = \"qwen3\", \"llama3\" or \"none\""));
}

TEST_F(PromptFormatTest, NoTokenizerConfigMeansNoTemplate) {
  WriteQwen3Shaped();
  fs::remove(dir_ / "tokenizer_config.json");
  absl::StatusOr<PromptFormat> format = Resolve();
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->family, ChatTemplateFamily::kPlain);
  EXPECT_THAT(format->stop_token_ids, ElementsAre(258));  // config.json's eos
}

TEST_F(PromptFormatTest, ATokenizerLargerThanTheEmbeddingIsAnError) {
  WriteQwen3Shaped(/*vocab_size=*/260);
  absl::StatusOr<PromptFormat> format = Resolve();
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(std::string(format.status().message()),
              HasSubstr("the tokenizer has 261 ids, more than the model's embedding (vocab_size "
                        "260 in " + (dir_ / "config.json").string()));
}

// A multi-turn episode's prompt, the model's turn up to its end-of-turn token, then the
// environment's next message as ObservationText renders it: the whole conversation must be what
// the family's Jinja template renders for it (the goldens of tests/golden/tokenizer).
TEST(ObservationTextTest, ContinuesTheConversationAsTheTemplateRendersIt) {
  const nlohmann::json cases =
      nlohmann::json::parse(std::ifstream("tests/golden/tokenizer/chat_cases.json"));
  int num_checked = 0;
  for (const nlohmann::json& c : cases) {
    const std::string name = c["name"];
    if (name != "qwen3_multi_turn" && name != "llama3_multi_turn_trimmed") continue;
    SCOPED_TRACE(name);
    PromptFormat format;
    format.family = *ParseChatTemplateFamily(c["family"].get<std::string>());
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c["messages"]) {
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    ASSERT_EQ(messages.size(), 4u);
    ASSERT_EQ(messages[2].role, "assistant");
    const std::string prompt = *RenderChat(format.family, absl::MakeConstSpan(messages).first(2));
    const std::string end_of_turn =
        format.family == ChatTemplateFamily::kQwen3 ? "<|im_end|>" : "<|eot_id|>";
    absl::StatusOr<std::string> observation = ObservationText(messages[3], format);
    ASSERT_TRUE(observation.ok()) << observation.status();
    EXPECT_EQ(prompt + "4" + end_of_turn + *observation, c["expected"].get<std::string>());
    ++num_checked;
  }
  EXPECT_EQ(num_checked, 2);
}

TEST(ObservationTextTest, FollowsTheFormatsThinkingSwitchAndNeverWritesBos) {
  const ChatMessage message{"user", "Too low."};
  PromptFormat qwen3;
  qwen3.family = ChatTemplateFamily::kQwen3;
  qwen3.template_options.enable_thinking = false;
  EXPECT_EQ(*ObservationText(message, qwen3),
            "\n<|im_start|>user\nToo low.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  PromptFormat llama3;
  llama3.family = ChatTemplateFamily::kLlama3;
  llama3.template_options.bos_token = "<|begin_of_text|>";
  llama3.template_options.add_generation_prompt = false;  // an observation always opens a turn
  EXPECT_EQ(*ObservationText(message, llama3),
            "<|start_header_id|>user<|end_header_id|>\n\nToo low.<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  PromptFormat plain;
  EXPECT_EQ(*ObservationText(message, plain), "\n\nToo low.");
  absl::StatusOr<std::string> tool = ObservationText({"tool", "x"}, llama3);
  EXPECT_EQ(tool.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep
