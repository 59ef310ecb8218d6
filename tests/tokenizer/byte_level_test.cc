#include "model/tokenizer/byte_level.h"

#include <string>

#include "gtest/gtest.h"
#include "model/tokenizer/regex_splitter.h"
#include "model/tokenizer/utf8.h"

namespace lockstep {
namespace {

TEST(ByteLevelTest, MapsBytesLikeGpt2) {
  EXPECT_EQ(ByteToUnicode(' '), "Ġ");
  EXPECT_EQ(ByteToUnicode('\n'), "Ċ");
  EXPECT_EQ(ByteToUnicode('A'), "A");
  EXPECT_EQ(ByteToUnicode(0xE9), "é");
  EXPECT_EQ(ByteToUnicode(0x00), "Ā");
  EXPECT_EQ(ByteToUnicode(0xAD), "Ń");
}

TEST(ByteLevelTest, RoundTripsEveryByte) {
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all.push_back(static_cast<char>(byte));
  std::string encoded;
  AppendByteLevelEncoded(all, &encoded);
  std::string decoded;
  ASSERT_TRUE(AppendByteLevelDecoded(encoded, &decoded));
  EXPECT_EQ(decoded, all);
}

TEST(ByteLevelTest, DecodeRejectsCharactersOutsideTheAlphabet) {
  std::string decoded;
  EXPECT_FALSE(AppendByteLevelDecoded("你", &decoded));
}

TEST(Utf8Test, ClassifiesSequences) {
  EXPECT_EQ(Utf8CharLength("a"), 1);
  EXPECT_EQ(Utf8CharLength("é"), 2);
  EXPECT_EQ(Utf8CharLength("你"), 3);
  EXPECT_EQ(Utf8CharLength("😀"), 4);
  EXPECT_EQ(Utf8CharLength("\xF0\x9F"), -1);  // Incomplete.
  EXPECT_EQ(Utf8CharLength("\xFF"), 0);
  EXPECT_EQ(Utf8CharLength("\xC0\xAF"), 0);      // Overlong '/'.
  EXPECT_EQ(Utf8CharLength("\xED\xA0\x80"), 0);  // Surrogate.
  EXPECT_EQ(FindInvalidUtf8("ok é 😀"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xFF"), 2u);
}

std::vector<std::string> SplitWith(std::string_view pattern, std::string_view text) {
  absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter = RegexSplitter::Create(pattern);
  EXPECT_TRUE(splitter.ok()) << splitter.status();
  std::vector<std::string_view> pieces;
  EXPECT_TRUE((*splitter)->Split(text, &pieces).ok());
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(RegexSplitterTest, KeepsGapsBetweenMatchesAsPieces) {
  EXPECT_EQ(SplitWith("[0-9]+", "ab12cd345"),
            (std::vector<std::string>{"ab", "12", "cd", "345"}));
}

TEST(RegexSplitterTest, Gpt2PatternSplitsContractionsAndSpaces) {
  EXPECT_EQ(SplitWith(kGpt2SplitPattern, "I'm  here"),
            (std::vector<std::string>{"I", "'m", " ", " here"}));
}

// Oniguruma's \s (Hugging Face) is Unicode White_Space: U+0085 yes, U+180E and U+FEFF no.
TEST(RegexSplitterTest, WhitespaceFollowsUnicodeWhiteSpace) {
  EXPECT_EQ(SplitWith(R"(\s+)", "a\xC2\x85" "b"), (std::vector<std::string>{"a", "\xC2\x85", "b"}));
  EXPECT_EQ(SplitWith(R"(\s+)", "a\xE1\xA0\x8E" "b"),
            (std::vector<std::string>{"a\xE1\xA0\x8E" "b"}));
  EXPECT_EQ(SplitWith(R"(\S+)", "a\xEF\xBB\xBF" "b c"),
            (std::vector<std::string>{"a\xEF\xBB\xBF" "b", " ", "c"}));
}

TEST(RegexSplitterTest, RewritesWhitespaceClassesInsideAndOutsideBrackets) {
  absl::StatusOr<std::string> rewritten = RewriteWhitespaceClasses(R"([^\s\p{L}]\s\S)");
  ASSERT_TRUE(rewritten.ok());
  EXPECT_EQ(rewritten->find("\\s"), std::string::npos);
  EXPECT_EQ(rewritten->find("\\S"), std::string::npos);
  EXPECT_FALSE(RewriteWhitespaceClasses(R"([\S])").ok());
}

TEST(RegexSplitterTest, RejectsBadPattern) {
  absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter = RegexSplitter::Create("(unclosed");
  EXPECT_EQ(splitter.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep
