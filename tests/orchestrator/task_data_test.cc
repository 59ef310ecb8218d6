// The job's data and prompt format from its config: [data] prompt_field / answer_field reach the
// JSONL reader, [tokenizer] chat_template / enable_thinking and [data] apply_chat_template reach
// the prompt text, and SFT batches are prompted exactly as RL prompts with the turn's end token;
// [data] task = "arithmetic_code" builds the code task's three sets.
// Each test fails if its key is read but ignored again.
#include "orchestrator/task_data.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
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

TEST_F(TaskDataTest, TheCodeTaskGivesProgramsPromptsWithTestsAndTheTeachersSftSet) {
  config_.data.train_file = "";
  config_.data.task = "arithmetic_code";
  config_.data.max_operand = 19;
  config_.data.eval_size = 10;
  config_.data.teacher_carry_error = 0.7;
  config_.data.teacher_draws = 10;
  absl::StatusOr<TaskData> data = LoadTaskData(config_);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->eval, nullptr);
  ASSERT_NE(data->sft, nullptr);
  EXPECT_EQ(data->eval->num_examples(), 10u);
  EXPECT_EQ(data->sft->num_examples(), 10 * data->train->num_examples());
  const Example& example = data->train->example(0);
  EXPECT_THAT(*example.prompt, HasSubstr(" in python:"));
  EXPECT_THAT(*example.answer, HasSubstr("print("));
  EXPECT_TRUE(example.metadata.at("tests").is_array());
  // Plain prompts, never templated, like the arithmetic task's.
  EXPECT_EQ(*PromptText(example, *Format()), *example.prompt);
}

TEST(GenerationConfigTest, TheModelsSamplingDefaultsApplyUnlessTheConfigGivesTheKey) {
  const fs::path dir = fs::path(::testing::TempDir()) / "generation_config_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path train = dir / "train.jsonl";
  std::ofstream(train) << R"({"prompt": "1+1=", "answer": "2"})" << "\n";
  const std::string recipe = absl::StrCat("[model]\npath = \"", dir.string(),
                                          "\"\n[data]\ntrain_file = \"", train.string(), "\"\n");
  absl::StatusOr<JobConfig> plain = ParseJobConfig(recipe, "job.toml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  // No generation_config.json: the defaults stay.
  JobConfig unchanged = *plain;
  ASSERT_TRUE(ApplyGenerationConfigDefaults(dir.string(), &unchanged).ok());
  EXPECT_EQ(unchanged.generator.temperature, 1.0);
  EXPECT_EQ(unchanged.generator.top_k, 0);

  std::ofstream(dir / "generation_config.json")
      << R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20,)"
      << R"( "eos_token_id": [151645, 151643]})";
  JobConfig from_model = *plain;
  ASSERT_TRUE(ApplyGenerationConfigDefaults(dir.string(), &from_model).ok());
  EXPECT_EQ(from_model.generator.temperature, 0.6);
  EXPECT_EQ(from_model.generator.top_p, 0.95);
  EXPECT_EQ(from_model.generator.top_k, 20);
  EXPECT_EQ(TrainerOptionsJson(from_model)["temperature"], 0.6);

  absl::StatusOr<JobConfig> given =
      ParseJobConfig(recipe + "[generator]\ntemperature = 1.0\n", "job.toml", {"generator.top_k=0"});
  ASSERT_TRUE(given.ok()) << given.status();
  ASSERT_TRUE(ApplyGenerationConfigDefaults(dir.string(), &*given).ok());
  EXPECT_EQ(given->generator.temperature, 1.0);  // the recipe's
  EXPECT_EQ(given->generator.top_k, 0);          // the --set's
  EXPECT_EQ(given->generator.top_p, 0.95);       // the model's

  std::ofstream(dir / "generation_config.json") << R"({"top_p": 0})";
  JobConfig bad = *plain;
  absl::Status status = ApplyGenerationConfigDefaults(dir.string(), &bad);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("with the sampling defaults of " + (dir / "generation_config.json").string()));
  std::ofstream(dir / "generation_config.json") << R"({"temperature": "hot"})";
  EXPECT_THAT(std::string(ApplyGenerationConfigDefaults(dir.string(), &bad).message()),
              HasSubstr("generation_config.json: temperature is not a number"));
}

}  // namespace
}  // namespace lockstep::orchestrator
