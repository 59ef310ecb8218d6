#include "orchestrator/task_data.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/arithmetic_task.h"

namespace lockstep::orchestrator {

absl::StatusOr<TaskData> LoadTaskData(const JobConfig& config) {
  TaskData data;
  if (config.data.task == "arithmetic") {
    ArithmeticTaskOptions options;
    options.max_operand = config.data.max_operand;
    options.teacher_carry_error = config.data.teacher_carry_error;
    options.teacher_draws = config.data.teacher_draws;
    options.eval_size = std::max<int64_t>(1, config.data.eval_size);
    options.seed = static_cast<uint64_t>(config.job.seed);
    absl::StatusOr<ArithmeticTask> task = MakeArithmeticTask(options);
    if (!task.ok()) return task.status();
    data.train = std::make_unique<Dataset>(std::move(task->train));
    data.sft = std::make_unique<Dataset>(std::move(task->sft));
    if (config.data.eval_size > 0) data.eval = std::make_unique<Dataset>(std::move(task->eval));
    return data;
  }
  absl::StatusOr<Dataset> train = LoadJsonlDataset(config.data.train_file);
  if (!train.ok()) return train.status();
  data.train = std::make_unique<Dataset>(*std::move(train));
  if (!config.data.eval_file.empty()) {
    absl::StatusOr<Dataset> eval = LoadJsonlDataset(config.data.eval_file);
    if (!eval.ok()) return eval.status();
    data.eval = std::make_unique<Dataset>(*std::move(eval));
  }
  return data;
}

absl::StatusOr<v1::SftStepRequest> SftBatch(DatasetIterator& iterator, const Tokenizer& tokenizer,
                                            int64_t batch_size, int64_t stop_token) {
  v1::SftStepRequest request;
  for (int64_t i = 0; i < batch_size; ++i) {
    const Example& example = iterator.Next();
    if (!example.prompt.has_value() || !example.answer.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("sft: example at line ", example.line_number,
                                                     " needs a prompt and an answer"));
    }
    absl::StatusOr<std::vector<int32_t>> prompt = tokenizer.Encode(*example.prompt);
    if (!prompt.ok()) return prompt.status();
    absl::StatusOr<std::vector<int32_t>> answer = tokenizer.Encode(*example.answer);
    if (!answer.ok()) return answer.status();
    v1::SftExample* out = request.add_examples();
    for (int32_t id : *prompt) out->add_prompt_token_ids(id);
    for (int32_t id : *answer) out->add_completion_token_ids(id);
    if (stop_token >= 0) out->add_completion_token_ids(stop_token);
  }
  return request;
}

std::vector<int64_t> StopTokens(const Tokenizer& tokenizer) {
  std::vector<int64_t> ids;
  for (const char* token : {"<|im_end|>", "<|endoftext|>"}) {
    if (std::optional<int32_t> id = tokenizer.TokenToId(token)) ids.push_back(*id);
  }
  return ids;
}

}  // namespace lockstep::orchestrator
