// The job's data and prompt format from its config: [data] prompt_field / answer_field reach the
// JSONL reader, [tokenizer] chat_template / enable_thinking and [data] apply_chat_template reach
// the prompt text, and SFT batches are prompted exactly as RL prompts with the turn's end token.
// Each test fails if its key is read but ignored again.
#include "orchestrator/task_data.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/byte_tokenizer_writer.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TaskDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("task_data_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
    ASSERT_TRUE(WriteByteLevelTokenizerFiles(dir_ / "model").ok());
    std::ofstream(dir_ / "model" / "config.json") << R"({"vocab_size": 512, "eos_token_id": 258})";
    tokenizer_ = *Tokenizer::FromFile(dir_ / "model");
    config_.model.path = (dir_ / "model").string();
    config_.data.train_file = (dir_ / "train.jsonl").string();
  }

  void WriteTrain(const std::string& text) { std::ofstream(config_.data.train_file) << text; }

  absl::StatusOr<PromptFormat> Format() {
    return ResolveJobPromptFormat(config_, config_.model.path, config_.model.path, *tokenizer_);
  }

  fs::path dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
  JobConfig config_;
};

TEST_F(TaskDataTest, PromptAndAnswerFieldsNameWhereTheRowsKeepThem) {
  WriteTrain(R"({"question": "2+2?", "reward_model": {"ground_truth": "4"}, "id": 9})"
             "\n");
  absl::StatusOr<TaskData> defaults = LoadTaskData(config_);
  ASSERT_FALSE(defaults.ok());
  EXPECT_THAT(std::string(defaults.status().message()),
              HasSubstr(config_.data.train_file + ":1: needs exactly one of 'prompt'"));
  config_.data.prompt_field = "question";
  config_.data.answer_field = "reward_model.ground_truth";
  absl::StatusOr<TaskData> data = LoadTaskData(config_);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->example(0).prompt, "2+2?");
  EXPECT_EQ(data->train->example(0).answer, "4");
  EXPECT_EQ(MetadataStrings(data->train->example(0)).at("id"), "9");
  // The eval file is read with the same fields.
  std::ofstream(dir_ / "eval.jsonl") << R"({"question": "1+1?"})" << "\n";
  config_.data.eval_file = (dir_ / "eval.jsonl").string();
  EXPECT_THAT(std::string(LoadTaskData(config_).status().message()),
              HasSubstr("eval.jsonl:1: missing field 'reward_model.ground_truth'"));
}

TEST_F(TaskDataTest, ChatTemplateKeysShapeThePromptText) {
  Example example;
  example.prompt = "2+2?";
  absl::StatusOr<PromptFormat> detected = Format();
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_EQ(*PromptText(example, *detected),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  config_.tokenizer.enable_thinking = false;
  EXPECT_EQ(*PromptText(example, *Format()),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  config_.data.apply_chat_template = false;
  EXPECT_EQ(*PromptText(example, *Format()), "2+2?");
  config_.data.apply_chat_template = true;
  config_.tokenizer.chat_template = "llama3";
  EXPECT_EQ(*PromptText(example, *Format()),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  config_.tokenizer.chat_template = "none";
  EXPECT_EQ(*PromptText(example, *Format()), "2+2?");
  // The built-in task's prompts are completions: never templated.
  config_.tokenizer.chat_template = "auto";
  config_.data.train_file = "";
  config_.data.task = "arithmetic";
  EXPECT_EQ(*PromptText(example, *Format()), "2+2?");
}

TEST_F(TaskDataTest, SftBatchesArePromptedLikeRlAndEndWithTheTurnsEnd) {
  WriteTrain(R"({"messages": [{"role": "user", "content": "Hi"}], "answer": "Yo"})"
             "\n");
  absl::StatusOr<TaskData> data = LoadTaskData(config_);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<PromptFormat> format = Format();
  ASSERT_TRUE(format.ok()) << format.status();
  DatasetIterator iterator(data->train.get(), 1);
  absl::StatusOr<v1::SftStepRequest> batch =
      SftBatch(iterator, *data->train, *tokenizer_, *format, 1);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const v1::SftExample& example = batch->examples(0);
  std::vector<int32_t> prompt(example.prompt_token_ids().begin(), example.prompt_token_ids().end());
  EXPECT_EQ(*tokenizer_->Decode(prompt), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  std::vector<int32_t> completion(example.completion_token_ids().begin(),
                                  example.completion_token_ids().end());
  EXPECT_EQ(*tokenizer_->Decode(completion), "Yo<|im_end|>");

  WriteTrain(R"({"prompt": "no answer"})"
             "\n");
  data = LoadTaskData(config_);
  DatasetIterator again(data->train.get(), 1);
  EXPECT_THAT(std::string(SftBatch(again, *data->train, *tokenizer_, *format, 1).status().message()),
              HasSubstr("train.jsonl:1: SFT needs an answer"));
}

}  // namespace
}  // namespace lockstep::orchestrator
