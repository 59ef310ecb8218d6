// Tokenizer behaviour on small hand-made tokenizer.json files: merges by rank, added tokens,
// NFC, and load-time errors for what is not implemented.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

// Byte-level BPE: 256 byte tokens (id == byte) plus "ab"=256, "bc"=257, "abc"=258, "aa"=259,
// merges (b c) < (a b) < (ab c) < (a a) by rank, added tokens "<x>"=300 (special), "<xy>"=301.
nlohmann::json SmallTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[ByteToUnicode(byte)] = byte;
  vocab["ab"] = 256;
  vocab["bc"] = 257;
  vocab["abc"] = 258;
  vocab["aa"] = 259;
  return {
      {"added_tokens",
       {{{"id", 300}, {"content", "<x>"}, {"special", true}},
        {{"id", 301}, {"content", "<xy>"}, {"special", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {{"b", "c"}, "a b", {"ab", "c"}, {"a", "a"}}}}}};
}

std::unique_ptr<Tokenizer> Load(const nlohmann::json& json) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromJsonString(json.dump());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

std::vector<int32_t> Ids(const Tokenizer& tokenizer, std::string_view text) {
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(BpeTokenizerTest, AppliesLowestRankMergeFirst) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SmallTokenizerJson());
  // (b c) outranks (a b), so "abc" becomes a + bc and (ab c) never applies.
  EXPECT_EQ(Ids(*tokenizer, "abc"), (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ(Ids(*tokenizer, "abab"), (std::vector<int32_t>{256, 256}));
}

TEST(BpeTokenizerTest, BreaksTiesLeftmostFirst) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SmallTokenizerJson());
  EXPECT_EQ(Ids(*tokenizer, "aaa"), (std::vector<int32_t>{259, 'a'}));
}

TEST(BpeTokenizerTest, IgnoreMergesTakesWholeWordsFromTheVocab) {
  nlohmann::json json = SmallTokenizerJson();
  json["model"]["ignore_merges"] = true;
  std::unique_ptr<Tokenizer> tokenizer = Load(json);
  EXPECT_EQ(Ids(*tokenizer, "abc"), (std::vector<int32_t>{258}));
}

TEST(BpeTokenizerTest, MatchesLongestAddedTokenBeforePreTokenizing) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SmallTokenizerJson());
  EXPECT_EQ(Ids(*tokenizer, "ab<xy>z<x>"), (std::vector<int32_t>{256, 301, 'z', 300}));
  EXPECT_EQ(Ids(*tokenizer, "<x"), (std::vector<int32_t>{'<', 'x'}));
}

TEST(BpeTokenizerTest, DecodeInvertsEncodeAndCanSkipSpecialTokens) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SmallTokenizerJson());
  const std::string text = "abc <x> é\n<xy>";
  std::vector<int32_t> ids = Ids(*tokenizer, text);
  EXPECT_EQ(*tokenizer->Decode(ids), text);
  EXPECT_EQ(*tokenizer->Decode(ids, /*skip_special_tokens=*/true), "abc  é\n<xy>");
  EXPECT_EQ(tokenizer->Decode({999}).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(BpeTokenizerTest, LooksUpTokensBothWays) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SmallTokenizerJson());
  EXPECT_EQ(tokenizer->TokenToId("Ġ"), ' ');
  EXPECT_EQ(tokenizer->TokenToId("<xy>"), 301);
  EXPECT_EQ(*tokenizer->IdToToken(' '), "Ġ");
  EXPECT_EQ(*tokenizer->TokenBytes(' '), " ");
  EXPECT_TRUE(tokenizer->IsSpecial(300));
  EXPECT_FALSE(tokenizer->IsSpecial(301));
  EXPECT_EQ(tokenizer->vocab_size(), 302);
}

TEST(BpeTokenizerTest, NfcNormalizerComposesCharacters) {
  nlohmann::json json = SmallTokenizerJson();
  json["normalizer"] = {{"type", "NFC"}};
  std::unique_ptr<Tokenizer> tokenizer = Load(json);
  EXPECT_EQ(Ids(*tokenizer, "e\xCC\x81"), Ids(*tokenizer, "\xC3\xA9"));
  EXPECT_EQ(Ids(*tokenizer, "\xE2\x84\xAB"), Ids(*tokenizer, "\xC3\x85"));  // Angstrom sign.
}

TEST(BpeTokenizerTest, RejectsInvalidUtf8) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SmallTokenizerJson());
  EXPECT_EQ(tokenizer->Encode("ok\xFF").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BpeTokenizerTest, RejectsWhatItDoesNotImplement) {
  nlohmann::json json = SmallTokenizerJson();
  json["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_EQ(Tokenizer::FromJsonString(json.dump()).status().code(), absl::StatusCode::kUnimplemented);
  json = SmallTokenizerJson();
  json["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_EQ(Tokenizer::FromJsonString(json.dump()).status().code(), absl::StatusCode::kUnimplemented);
  json = SmallTokenizerJson();
  json["model"]["type"] = "WordPiece";
  EXPECT_EQ(Tokenizer::FromJsonString(json.dump()).status().code(), absl::StatusCode::kUnimplemented);
  json = SmallTokenizerJson();
  json["added_tokens"][0]["lstrip"] = true;
  EXPECT_EQ(Tokenizer::FromJsonString(json.dump()).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(Tokenizer::FromJsonString("not json").ok());
  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep
