// The C++ tokenizer against golden ids from the JavaScript port of Hugging Face tokenizers,
// with the real Qwen3 and Llama 3 tokenizer.json files: every corpus string must give exactly
// the golden ids and decode back to itself; chat templates must render the hand-derived strings.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/incremental_decoder.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/tokenizer/golden_files.h"

namespace lockstep {
namespace {

using ::lockstep::testing::GoldenDir;
using ::lockstep::testing::ReadJsonLines;
using ::lockstep::testing::ReferenceTokenizerDir;
using ::lockstep::testing::RunningInCi;

// Loaded once per family for the whole test binary (the Qwen3 file is 11 MB).
const Tokenizer* ReferenceTokenizer(const std::string& family) {
  static auto* tokenizers = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  auto it = tokenizers->find(family);
  if (it == tokenizers->end()) {
    std::unique_ptr<Tokenizer> loaded;
    const std::filesystem::path path = ReferenceTokenizerDir(family) / "tokenizer.json";
    if (std::filesystem::exists(path)) {
      absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(path);
      EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
      if (tokenizer.ok()) loaded = *std::move(tokenizer);
    }
    it = tokenizers->emplace(family, std::move(loaded)).first;
  }
  return it->second.get();
}

#define REQUIRE_REFERENCE_TOKENIZER(tokenizer, family)                                       \
  const Tokenizer* tokenizer = ReferenceTokenizer(family);                                   \
  if (tokenizer == nullptr) {                                                                \
    if (RunningInCi()) FAIL() << "missing " << ReferenceTokenizerDir(family) << "; run "     \
                              << "scripts/fetch_tokenizers.sh";                              \
    GTEST_SKIP() << "no " << ReferenceTokenizerDir(family) << "; run scripts/fetch_tokenizers.sh"; \
  }

class GoldenCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCorpusTest, EncodeMatchesReferenceAndDecodeRoundTrips) {
  REQUIRE_REFERENCE_TOKENIZER(tokenizer, GetParam());
  const std::vector<nlohmann::json> corpus = ReadJsonLines(GoldenDir() / "corpus.jsonl");
  const std::vector<nlohmann::json> golden = ReadJsonLines(GoldenDir() / (GetParam() + "_ids.jsonl"));
  ASSERT_GE(corpus.size(), 2000u);
  ASSERT_EQ(corpus.size(), golden.size());
  absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(
      GetParam() == "qwen3" ? nlohmann::json{{"type", "NFC"}} : nlohmann::json());
  ASSERT_TRUE(normalizer.ok());
  int num_mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i]["text"].get<std::string>();
    const std::vector<int32_t> expected = golden[i].get<std::vector<int32_t>>();
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(text);
    ASSERT_TRUE(ids.ok()) << "line " << i + 1 << ": " << ids.status();
    if (*ids != expected && ++num_mismatches <= 10) {
      ADD_FAILURE() << "corpus line " << i + 1 << " " << nlohmann::json(text).dump()
                    << "\n  got      " << nlohmann::json(*ids).dump()
                    << "\n  expected " << nlohmann::json(expected).dump();
    }
    absl::StatusOr<std::string> decoded = tokenizer->Decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    // Qwen3 normalizes to NFC first, so what comes back is the NFC form of the text (the text
    // itself for all but the strings with decomposed characters); Llama 3 has no normalizer.
    std::string nfc_storage;
    absl::StatusOr<std::string_view> nfc = normalizer->Normalize(text, &nfc_storage);
    ASSERT_TRUE(nfc.ok());
    EXPECT_EQ(*decoded, *nfc) << "corpus line " << i + 1;
  }
  EXPECT_EQ(num_mismatches, 0) << "of " << corpus.size() << " strings";
}

TEST_P(GoldenCorpusTest, IncrementalDecodeEqualsDecode) {
  REQUIRE_REFERENCE_TOKENIZER(tokenizer, GetParam());
  const std::vector<nlohmann::json> golden = ReadJsonLines(GoldenDir() / (GetParam() + "_ids.jsonl"));
  for (size_t i = 0; i < golden.size(); ++i) {
    const std::vector<int32_t> ids = golden[i].get<std::vector<int32_t>>();
    IncrementalDecoder decoder(tokenizer);
    std::string streamed;
    for (int32_t id : ids) {
      absl::StatusOr<std::string> piece = decoder.Push(id);
      ASSERT_TRUE(piece.ok()) << piece.status();
      streamed += *piece;
    }
    streamed += decoder.Flush();
    EXPECT_EQ(streamed, *tokenizer->Decode(ids)) << "golden line " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, GoldenCorpusTest, ::testing::Values("qwen3", "llama3"));

TEST(GoldenChatTest, RenderedStringsAndIdsMatchReference) {
  const nlohmann::json cases = nlohmann::json::parse(std::ifstream(GoldenDir() / "chat_cases.json"));
  const std::vector<nlohmann::json> golden = ReadJsonLines(GoldenDir() / "chat_ids.jsonl");
  ASSERT_EQ(cases.size(), golden.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c["messages"]) {
      ChatMessage message{m["role"], m["content"], std::nullopt};
      if (m.contains("reasoning_content")) message.reasoning_content = m["reasoning_content"];
      messages.push_back(message);
    }
    ChatTemplateOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.enable_thinking = c["enable_thinking"];
    absl::StatusOr<ChatTemplateFamily> family = ParseChatTemplateFamily(c["family"].get<std::string>());
    ASSERT_TRUE(family.ok());
    absl::StatusOr<std::string> rendered = RenderChat(*family, messages, options);
    ASSERT_TRUE(rendered.ok()) << rendered.status();
    EXPECT_EQ(*rendered, c["expected"].get<std::string>());

    const Tokenizer* tokenizer =
        ReferenceTokenizer(*family == ChatTemplateFamily::kLlama3 ? "llama3" : "qwen3");
    if (tokenizer == nullptr) {
      if (RunningInCi()) FAIL() << "missing reference tokenizers; run scripts/fetch_tokenizers.sh";
      continue;
    }
    EXPECT_EQ(*tokenizer->Encode(*rendered), golden[i]["ids"].get<std::vector<int32_t>>());
  }
}

TEST(GoldenChatTest, DetectsFamilyFromReferenceConfigs) {
  for (const std::string family : {"qwen3", "llama3"}) {
    const std::filesystem::path dir = ReferenceTokenizerDir(family);
    if (!std::filesystem::exists(dir / "tokenizer_config.json")) {
      if (RunningInCi()) FAIL() << "missing " << dir;
      GTEST_SKIP() << "no " << dir << "; run scripts/fetch_tokenizers.sh";
    }
    absl::StatusOr<ChatTemplateFamily> detected = ResolveChatTemplateFamily(dir, "auto");
    ASSERT_TRUE(detected.ok()) << detected.status();
    EXPECT_EQ(ChatTemplateFamilyName(*detected), family);
  }
}

}  // namespace
}  // namespace lockstep
