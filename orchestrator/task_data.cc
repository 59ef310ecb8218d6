#include "orchestrator/task_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/arithmetic_code_task.h"
#include "data/arithmetic_task.h"

namespace lockstep::orchestrator {

absl::StatusOr<TaskData> LoadTaskData(const JobConfig& config) {
  TaskData data;
  if (config.data.task == "arithmetic" || config.data.task == "arithmetic_code") {
    ArithmeticTaskOptions options;
    options.max_operand = config.data.max_operand;
    options.teacher_carry_error = config.data.teacher_carry_error;
    options.teacher_draws = config.data.teacher_draws;
    options.eval_size = std::max<int64_t>(1, config.data.eval_size);
    options.seed = static_cast<uint64_t>(config.job.seed);
    absl::StatusOr<ArithmeticTask> task = config.data.task == "arithmetic"
                                              ? MakeArithmeticTask(options)
                                              : MakeArithmeticCodeTask(options);
    if (!task.ok()) return task.status();
    data.train = std::make_unique<Dataset>(std::move(task->train));
    data.sft = std::make_unique<Dataset>(std::move(task->sft));
    if (config.data.eval_size > 0) data.eval = std::make_unique<Dataset>(std::move(task->eval));
    return data;
  }
  DatasetFields fields;
  fields.prompt_field = config.data.prompt_field;
  fields.answer_field = config.data.answer_field;
  absl::StatusOr<Dataset> train = LoadJsonlDataset(config.data.train_file, fields);
  if (!train.ok()) return train.status();
  data.train = std::make_unique<Dataset>(*std::move(train));
  if (!config.data.eval_file.empty()) {
    absl::StatusOr<Dataset> eval = LoadJsonlDataset(config.data.eval_file, fields);
    if (!eval.ok()) return eval.status();
    // The first eval_size rows; none at 0.
    std::vector<Example> rows = eval->examples();
    rows.resize(std::min<size_t>(rows.size(), static_cast<size_t>(config.data.eval_size)));
    if (!rows.empty()) data.eval = std::make_unique<Dataset>(std::move(rows), eval->source());
  }
  return data;
}

absl::StatusOr<PromptFormat> ResolveJobPromptFormat(const JobConfig& config,
                                                    const std::string& model_dir,
                                                    const std::string& tokenizer_path,
                                                    const Tokenizer& tokenizer) {
  const std::filesystem::path path(tokenizer_path);
  const std::filesystem::path tokenizer_dir =
      std::filesystem::is_directory(path) ? path : path.parent_path();
  PromptFormatOptions options;
  options.chat_template = config.tokenizer.chat_template;
  options.enable_thinking = config.tokenizer.enable_thinking;
  options.apply_to_plain_prompts = config.data.apply_chat_template && config.data.task.empty();
  return ResolvePromptFormat(tokenizer_dir, model_dir, tokenizer, options);
}

absl::Status ApplyGenerationConfigDefaults(const std::string& model_dir, JobConfig* config) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a JSON object"));
  }
  GeneratorSection& generator = config->generator;
  for (const auto& [name, target] : {std::pair{"temperature", &generator.temperature},
                                     std::pair{"top_p", &generator.top_p}}) {
    if (!json.contains(name) || config->given_keys.count(absl::StrCat("generator.", name))) {
      continue;
    }
    if (!json[name].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", name, " is not a number"));
    }
    *target = json[name].get<double>();
  }
  if (json.contains("top_k") && !config->given_keys.count("generator.top_k")) {
    if (!json["top_k"].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ": top_k is not an integer"));
    }
    generator.top_k = json["top_k"].get<int64_t>();
  }
  if (absl::Status s = ValidateJobConfig(*config); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("with the sampling defaults of ", path.string(), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SftStepRequest> SftBatch(DatasetIterator& iterator, const Dataset& dataset,
                                            const Tokenizer& tokenizer,
                                            const PromptFormat& format, int64_t batch_size) {
  v1::SftStepRequest request;
  for (int64_t i = 0; i < batch_size; ++i) {
    const Example& example = iterator.Next();
    const std::string where = absl::StrCat(dataset.source(), ":", example.line_number);
    if (!example.answer.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": SFT needs an answer"));
    }
    absl::StatusOr<std::string> text = PromptText(example, format);
    if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", text.status().message()));
    absl::StatusOr<std::vector<int32_t>> prompt = tokenizer.Encode(*text);
    if (!prompt.ok()) return prompt.status();
    absl::StatusOr<std::vector<int32_t>> answer = tokenizer.Encode(*example.answer);
    if (!answer.ok()) return answer.status();
    v1::SftExample* out = request.add_examples();
    for (int32_t id : *prompt) out->add_prompt_token_ids(id);
    for (int32_t id : *answer) out->add_completion_token_ids(id);
    if (!format.stop_token_ids.empty()) out->add_completion_token_ids(format.stop_token_ids[0]);
  }
  return request;
}

}  // namespace lockstep::orchestrator
