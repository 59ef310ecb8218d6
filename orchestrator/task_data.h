// The data a job trains and evaluates on: the task's train, eval and SFT warm-start sets (the
// built-in arithmetic task, or JSONL files, their fields where [data] prompt_field/answer_field
// say), the prompt format (chat template, stop tokens) from the model's files, and the SFT
// batches built from them.
//
// Pure functions over the config and the datasets; thread-compatible.
#ifndef LOCKSTEP_ORCHESTRATOR_TASK_DATA_H_
#define LOCKSTEP_ORCHESTRATOR_TASK_DATA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset_iterator.h"
#include "data/jsonl_dataset.h"
#include "data/prompt_format.h"
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/config.h"
#include "proto/trainer.pb.h"

namespace lockstep::orchestrator {

struct TaskData {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> eval;  // null without a held-out set
  std::unique_ptr<Dataset> sft;   // the warm-start set when it differs from train
};

// [data] of the config: the arithmetic or arithmetic_code task (seeded by job.seed) or train_file / eval_file,
// each row's prompt and answer read from data.prompt_field / data.answer_field. Errors name the
// file and line, or the option that failed.
absl::StatusOr<TaskData> LoadTaskData(const JobConfig& config);

// The prompt format of the job ([tokenizer] chat_template / enable_thinking, [data]
// apply_chat_template) read from the tokenizer's and the model's files (data/prompt_format.h).
// The built-in tasks' prompts are completions ("17+8=") and stay untemplated.
// `tokenizer_path` is the tokenizer.json or its directory.
absl::StatusOr<PromptFormat> ResolveJobPromptFormat(const JobConfig& config,
                                                    const std::string& model_dir,
                                                    const std::string& tokenizer_path,
                                                    const Tokenizer& tokenizer);

// Sampling defaults from `model_dir`/generation_config.json: its temperature, top_p and top_k
// replace the [generator] keys the config did not give (config.given_keys); keys the recipe or
// --set gave win. No file: nothing changes. InvalidArgument naming the file for a value of the
// wrong type, and for the result failing ValidateJobConfig (e.g. top_p 0).
absl::Status ApplyGenerationConfigDefaults(const std::string& model_dir, JobConfig* config);

// A batch of `batch_size` SFT examples from `iterator`: the prompt as the model sees it
// (PromptText), then the reference answer and the format's first stop token (none without one).
// InvalidArgument naming the file and line of an example without an answer.
absl::StatusOr<v1::SftStepRequest> SftBatch(DatasetIterator& iterator, const Dataset& dataset,
                                            const Tokenizer& tokenizer,
                                            const PromptFormat& format, int64_t batch_size);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_TASK_DATA_H_
