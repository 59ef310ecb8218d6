#include "model/tokenizer/byte_tokenizer_writer.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace lockstep {
namespace {

class ByteTokenizerWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("byte_tokenizer_" + std::string(
                ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ByteTokenizerWriterTest, WritesFilesThatLoadAndRoundTrip) {
  ASSERT_TRUE(WriteByteLevelTokenizerFiles(dir_).ok());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(dir_);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), kByteTokenizerNumIds);
  EXPECT_LT((*tokenizer)->vocab_size(), 512);
  const std::string text = "<|im_start|>user\nHé 😀<|im_end|>\n<think>x</think><|endoftext|>";
  absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), kByteTokenizerImStartId);
  EXPECT_EQ((*ids)[1], 'u');  // Ids of bytes are the byte values.
  EXPECT_EQ(ids->back(), kByteTokenizerEndOfTextId);
  EXPECT_EQ(*(*tokenizer)->Decode(*ids), text);
}

TEST_F(ByteTokenizerWriterTest, ConfigNamesEosAndAQwen3Template) {
  ASSERT_TRUE(WriteByteLevelTokenizerFiles(dir_).ok());
  absl::StatusOr<ChatTemplateFamily> family = ResolveChatTemplateFamily(dir_, "auto");
  ASSERT_TRUE(family.ok()) << family.status();
  EXPECT_EQ(*family, ChatTemplateFamily::kQwen3);
  EXPECT_EQ(ByteLevelTokenizerConfigJson()["eos_token"], "<|im_end|>");
}

TEST_F(ByteTokenizerWriterTest, FailsForMissingDirectory) {
  EXPECT_EQ(WriteByteLevelTokenizerFiles(dir_ / "missing").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep
