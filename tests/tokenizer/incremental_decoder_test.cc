#include "model/tokenizer/incremental_decoder.h"

#include "gtest/gtest.h"
#include "model/tokenizer/byte_tokenizer_writer.h"

namespace lockstep {
namespace {

std::unique_ptr<Tokenizer> ByteTokenizer() {
  return *Tokenizer::FromJsonString(ByteLevelTokenizerJson().dump());
}

TEST(IncrementalDecoderTest, HoldsBackPartialCharacters) {
  std::unique_ptr<Tokenizer> tokenizer = ByteTokenizer();
  IncrementalDecoder decoder(tokenizer.get());
  // U+1F600 is F0 9F 98 80: nothing comes out until the fourth byte.
  EXPECT_EQ(*decoder.Push(0xF0), "");
  EXPECT_EQ(*decoder.Push(0x9F), "");
  EXPECT_EQ(*decoder.Push(0x98), "");
  EXPECT_EQ(decoder.num_pending_bytes(), 3u);
  EXPECT_EQ(*decoder.Push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(*decoder.Push('a'), "a");
  EXPECT_EQ(decoder.Flush(), "");
}

TEST(IncrementalDecoderTest, ReplacesInvalidBytesAndFlushesIncompleteOnes) {
  std::unique_ptr<Tokenizer> tokenizer = ByteTokenizer();
  IncrementalDecoder decoder(tokenizer.get());
  EXPECT_EQ(*decoder.Push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(*decoder.Push(0xE4), "");
  EXPECT_EQ(decoder.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.num_pending_bytes(), 0u);
}

TEST(IncrementalDecoderTest, SkipsSpecialTokensWhenAsked) {
  std::unique_ptr<Tokenizer> tokenizer = ByteTokenizer();
  IncrementalDecoder keep(tokenizer.get());
  IncrementalDecoder skip(tokenizer.get(), /*skip_special_tokens=*/true);
  EXPECT_EQ(*keep.Push(kByteTokenizerImEndId), "<|im_end|>");
  EXPECT_EQ(*skip.Push(kByteTokenizerImEndId), "");
  EXPECT_FALSE(skip.Push(600).ok());
}

}  // namespace
}  // namespace lockstep
