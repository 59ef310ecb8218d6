// Where diagnose's sequences come from: token lists on the command line, a JSONL file of
// prompts with completions (token ids, or text encoded with the model's tokenizer), or a JSONL
// file of behaviour log-probs written by another engine.
//
// File formats (one JSON object a line):
//   prompts:    {"prompt_tokens": [..], "completion_tokens": [..]}  or
//               {"prompt": "text", "completion": "text"}
//   behaviour:  either form above plus "logprobs": [..] (one per completion token)
#ifndef LOCKSTEP_DIAGNOSE_INPUTS_H_
#define LOCKSTEP_DIAGNOSE_INPUTS_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "diagnose/execution_paths.h"
#include "model/tokenizer/tokenizer.h"

namespace lockstep::diagnose {

// "1,2,3" lists; prompt_length 0 = half of each sequence (at least 1).
absl::StatusOr<std::vector<DiagnoseSequence>> SequencesFromTokenLists(
    const std::vector<std::string>& lists, int64_t prompt_length);

struct SequenceFile {
  std::vector<DiagnoseSequence> sequences;
  std::vector<std::vector<float>> logprobs;  // behaviour files only, per sequence
};

// Reads a prompts or behaviour file (`with_logprobs`). `tokenizer` may be null when every line
// gives token ids. InvalidArgument naming file:line for a bad line, a text line without a
// tokenizer, a logprobs list whose length is not the completion's.
absl::StatusOr<SequenceFile> ReadSequenceFile(const std::filesystem::path& path,
                                              const Tokenizer* tokenizer, bool with_logprobs);

// The tokenizer of `dir` (tokenizer.json), checked against the model's vocabulary:
// InvalidArgument when the tokenizer has ids the model cannot embed.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::filesystem::path& dir,
                                                            int64_t model_vocab_size);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_INPUTS_H_
