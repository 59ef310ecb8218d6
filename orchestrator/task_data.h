// The data a job trains and evaluates on: the task's train, eval and SFT warm-start sets (the
// built-in arithmetic task, or JSONL files), the SFT batches built from them, and the tokens
// after which a completion ends.
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
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/config.h"
#include "proto/trainer.pb.h"

namespace lockstep::orchestrator {

struct TaskData {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> eval;  // null without a held-out set
  std::unique_ptr<Dataset> sft;   // the warm-start set when it differs from train
};

// [data] of the config: the arithmetic task (seeded by job.seed) or train_file / eval_file.
// Errors name the file or the option that failed.
absl::StatusOr<TaskData> LoadTaskData(const JobConfig& config);

// A batch of `batch_size` SFT examples from `iterator`: prompt tokens, then the reference
// answer and `stop_token` (left out when < 0). InvalidArgument naming the line of an example
// without a prompt or an answer.
absl::StatusOr<v1::SftStepRequest> SftBatch(DatasetIterator& iterator, const Tokenizer& tokenizer,
                                            int64_t batch_size, int64_t stop_token);

// The tokens after which a completion ends: the tokenizer's end-of-turn and end-of-text, those
// it has.
std::vector<int64_t> StopTokens(const Tokenizer& tokenizer);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_TASK_DATA_H_
