#include "data/jsonl_dataset.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

class JsonlDatasetTest : public ::testing::Test {
 protected:
  std::filesystem::path Write(const std::string& contents) {
    std::filesystem::path path = std::filesystem::path(::testing::TempDir()) /
        (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".jsonl");
    std::ofstream(path) << contents;
    return path;
  }
};

TEST_F(JsonlDatasetTest, LoadsPromptsMessagesAnswersAndMetadata) {
  std::filesystem::path path = Write(
      "{\"prompt\": \"2+2?\", \"answer\": \"4\", \"metadata\": {\"id\": 7, \"tags\": [\"math\"]}}\n"
      "\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
      " {\"role\": \"user\", \"content\": \"Hi\"}]}\r\n");
  absl::StatusOr<Dataset> dataset = LoadJsonlDataset(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_EQ(dataset->num_examples(), 2u);
  const Example& first = dataset->example(0);
  EXPECT_EQ(first.prompt, "2+2?");
  EXPECT_EQ(first.answer, "4");
  EXPECT_EQ(first.metadata["tags"][0], "math");
  EXPECT_EQ(first.line_number, 1);
  const Example& second = dataset->example(1);
  EXPECT_FALSE(second.prompt.has_value());
  ASSERT_EQ(second.messages.size(), 2u);
  EXPECT_EQ(second.messages[1].content, "Hi");
  EXPECT_EQ(second.line_number, 3);
  EXPECT_TRUE(second.metadata.is_null());
}

TEST_F(JsonlDatasetTest, BadLinesNameFileAndLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"prompt\": \"ok\"}\n{not json}\n", ":2: not valid JSON"},
      {"[1, 2]\n", ":1: line is not a JSON object"},
      {"{\"answer\": \"4\"}\n", ":1: needs exactly one of 'prompt' and 'messages'"},
      {"{\"prompt\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n",
       ":1: needs exactly one"},
      {"{\"prompt\": 3}\n", ":1: 'prompt' is not a string"},
      {"{\"prompt\": \"a\", \"answer\": 4}\n", ":1: 'answer' is not a string"},
      {"{\"messages\": []}\n", ":1: 'messages' is not a non-empty list"},
      {"{\"messages\": [{\"role\": \"user\"}]}\n", "messages[0] needs 'role' and 'content'"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 1}]}\n", "messages[0].content is not"},
      {"{\"prompt\": \"a\", \"source\": \"x\"}\n", ":1: unknown key 'source'"},
  };
  for (const auto& [contents, expected] : cases) {
    std::filesystem::path path = Write(contents);
    absl::StatusOr<Dataset> dataset = LoadJsonlDataset(path);
    ASSERT_FALSE(dataset.ok()) << contents;
    EXPECT_EQ(dataset.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(dataset.status().message()), HasSubstr(path.string() + ":")) << contents;
    EXPECT_THAT(std::string(dataset.status().message()), HasSubstr(expected)) << contents;
  }
}

TEST_F(JsonlDatasetTest, EmptyAndMissingFilesAreErrors) {
  EXPECT_EQ(LoadJsonlDataset(Write("\n\n")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadJsonlDataset("/nonexistent.jsonl").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JsonlDatasetTest, RendersPromptsWithTheChatTemplate) {
  absl::StatusOr<Dataset> dataset = LoadJsonlDataset(Write(
      "{\"prompt\": \"2+2?\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n"));
  ASSERT_TRUE(dataset.ok());
  EXPECT_EQ(*RenderPrompt(dataset->example(0), ChatTemplateFamily::kPlain), "2+2?");
  EXPECT_EQ(*RenderPrompt(dataset->example(0), ChatTemplateFamily::kQwen3),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*RenderPrompt(dataset->example(1), ChatTemplateFamily::kQwen3),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace lockstep
