#include "data/jsonl_dataset.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
      {"{\"prompt\": 3}\n", ":1: 'prompt' is neither a string nor a non-empty list"},
      {"{\"prompt\": \"a\", \"answer\": 4}\n", ":1: 'answer' is not a string"},
      {"{\"messages\": []}\n", ":1: 'messages' is neither a string nor a non-empty list"},
      {"{\"messages\": [{\"role\": \"user\"}]}\n", "messages[0] needs 'role' and 'content'"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 1}]}\n", "messages[0].content is not"},
      {"{\"prompt\": \"a\", \"metadata\": 3, \"source\": \"x\"}\n",
       ":1: 'metadata' is not an object, so the extra field 'source' has nowhere to go"},
      {"{\"prompt\": \"caf\xC3\"}\n", ":1: not valid UTF-8 (byte 16 of the line)"},
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

TEST_F(JsonlDatasetTest, NestedFieldsOfTheVerlLayoutAreReadAndTheRestIsMetadata) {
  std::filesystem::path path = Write(
      "{\"data_source\": \"gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"6*12?\"}],"
      " \"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"72\"},"
      " \"extra_info\": {\"index\": 3}}\n");
  DatasetFields fields;
  fields.answer_field = "reward_model.ground_truth";
  absl::StatusOr<Dataset> dataset = LoadJsonlDataset(path, fields);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const Example& example = dataset->example(0);
  EXPECT_FALSE(example.prompt.has_value());
  ASSERT_EQ(example.messages.size(), 1u);
  EXPECT_EQ(example.messages[0].content, "6*12?");
  EXPECT_EQ(example.answer, "72");
  EXPECT_EQ(example.metadata["data_source"], "gsm8k");
  EXPECT_EQ(example.metadata["ability"], "math");
  EXPECT_EQ(example.metadata["extra_info"]["index"], 3);
  EXPECT_EQ(example.metadata["reward_model"]["style"], "rule");
  EXPECT_FALSE(example.metadata.contains("prompt"));
  // The default names do not find this row's answer: it has none.
  absl::StatusOr<Dataset> unmapped = LoadJsonlDataset(path);
  ASSERT_TRUE(unmapped.ok()) << unmapped.status();
  EXPECT_FALSE(unmapped->example(0).answer.has_value());
}

TEST_F(JsonlDatasetTest, RenamedFieldsAreReadAndTheOldNamesAreNot) {
  std::filesystem::path path = Write(
      "{\"question\": \"2+2?\", \"solution\": \"4\", \"metadata\": {\"id\": 1}, \"level\": 2}\n"
      "{\"conversations\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"solution\": \"5\"}\n");
  DatasetFields question;
  question.prompt_field = "question";
  question.answer_field = "solution";
  absl::StatusOr<Dataset> first = LoadJsonlDataset(path, question);
  ASSERT_FALSE(first.ok());
  EXPECT_THAT(std::string(first.status().message()),
              HasSubstr(path.string() + ":2: missing field 'question' (data.prompt_field)"));
  std::filesystem::path one = Write(
      "{\"question\": \"2+2?\", \"solution\": \"4\", \"metadata\": {\"id\": 1}, \"level\": 2}\n");
  absl::StatusOr<Dataset> dataset = LoadJsonlDataset(one, question);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->example(0).prompt, "2+2?");
  EXPECT_EQ(dataset->example(0).answer, "4");
  EXPECT_EQ(dataset->example(0).metadata["id"], 1);
  EXPECT_EQ(dataset->example(0).metadata["level"], 2);
  // The same file under the default names has no 'prompt'.
  EXPECT_THAT(std::string(LoadJsonlDataset(one).status().message()),
              HasSubstr(":1: needs exactly one of 'prompt' and 'messages'"));
  DatasetFields conversations;
  conversations.prompt_field = "conversations";
  conversations.answer_field = "solution";
  std::filesystem::path chat = Write(
      "{\"conversations\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"solution\": \"5\"}\n");
  absl::StatusOr<Dataset> chats = LoadJsonlDataset(chat, conversations);
  ASSERT_TRUE(chats.ok()) << chats.status();
  EXPECT_EQ(chats->example(0).messages[0].content, "Hi");
  EXPECT_EQ(chats->example(0).answer, "5");
}

TEST_F(JsonlDatasetTest, EveryBadLineIsNamedWithItsFileAndLine) {
  DatasetFields fields;
  fields.answer_field = "reward_model.ground_truth";
  std::string contents =
      "{\"prompt\": \"ok\", \"reward_model\": {\"ground_truth\": \"1\"}}\n"
      "{\"prompt\": \"no answer\", \"reward_model\": {}}\n"
      "{\"prompt\": \"\xFF\xFE\", \"reward_model\": {\"ground_truth\": \"1\"}}\n";
  for (int i = 0; i < 12; ++i) contents += "{\"prompt\": \"x\"}\n";
  std::filesystem::path path = Write(contents);
  absl::StatusOr<Dataset> dataset = LoadJsonlDataset(path, fields);
  ASSERT_FALSE(dataset.ok());
  const std::string message(dataset.status().message());
  EXPECT_THAT(message, HasSubstr(path.string() +
                                 ":2: missing field 'reward_model.ground_truth' (data.answer_field)"));
  EXPECT_THAT(message, HasSubstr(path.string() + ":3: not valid UTF-8 (byte 13 of the line)"));
  EXPECT_THAT(message, HasSubstr(path.string() + ":4: missing field"));
  EXPECT_THAT(message, HasSubstr(path.string() + ":11: missing field"));
  EXPECT_THAT(message, Not(HasSubstr(":12:")));
  EXPECT_THAT(message, HasSubstr("... 4 more bad lines (14 in all)"));
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
