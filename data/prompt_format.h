// How a dataset row becomes what the model is prompted with, and which tokens end its reply,
// read once from the model's own files before anything starts:
//   chat template : tokenizer_config.json's `chat_template`, recognised as Qwen3 or Llama 3
//                   (model/tokenizer/chat_template.h), or named in the job's config;
//   stop tokens   : the template's end-of-turn tokens, then the eos ids of
//                   generation_config.json and config.json (one id or a list), then
//                   tokenizer_config.json's `eos_token`, each once.
// Plain data and free functions; thread-compatible.
#ifndef LOCKSTEP_DATA_PROMPT_FORMAT_H_
#define LOCKSTEP_DATA_PROMPT_FORMAT_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/example.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace lockstep {

struct PromptFormatOptions {
  std::string chat_template = "auto";  // "auto" | "qwen3" | "llama3" | "none"
  bool apply_to_plain_prompts = true;  // a `prompt` string goes through the template too
  bool enable_thinking = true;         // Qwen3's thinking switch
};

struct PromptFormat {
  ChatTemplateFamily family = ChatTemplateFamily::kPlain;
  bool apply_to_plain_prompts = true;
  ChatTemplateOptions template_options;
  // Ids after which a completion ends. The first is the end of the model's turn: SFT writes it
  // after each reference answer.
  std::vector<int32_t> stop_token_ids;
  // Where the family came from, for messages ("<dir>/tokenizer_config.json" or the config key).
  std::string template_source;
};

// Reads `tokenizer_dir`/tokenizer_config.json and `model_dir`/{generation_config,config}.json
// (each optional). InvalidArgument naming the file for: a chat_template that is not recognised
// under "auto", a file that is not JSON, an eos id that is not an integer, a stop token outside
// `tokenizer`'s vocabulary, and a tokenizer whose vocabulary is larger than config.json's
// vocab_size (the model's embedding). InvalidArgument for an unknown `chat_template` name.
absl::StatusOr<PromptFormat> ResolvePromptFormat(const std::filesystem::path& tokenizer_dir,
                                                 const std::filesystem::path& model_dir,
                                                 const Tokenizer& tokenizer,
                                                 const PromptFormatOptions& options);

// The prompt text of `example` as the model sees it: messages through the template; a plain
// prompt as one user message when `apply_to_plain_prompts` (and the family has markup), else
// as it is.
absl::StatusOr<std::string> PromptText(const Example& example, const PromptFormat& format);

// What an observation with a role (an environment's reply in a multi-turn episode) adds to
// a conversation whose model turn just ended on its end-of-turn token: what the template writes
// after that token (Qwen3 "\n", Llama 3 nothing), the message, and the header that opens the
// model's next turn (with Qwen3's thinking switch), never a second bos. Plain: the content after
// a blank line. InvalidArgument for a role the family has no markup for.
absl::StatusOr<std::string> ObservationText(const ChatMessage& message, const PromptFormat& format);

// One line for users: "chat template qwen3 (<source>), plain prompts templated, stop tokens
// [258 <|im_end|>, 256 <|endoftext|>]".
std::string DescribePromptFormat(const PromptFormat& format, const Tokenizer& tokenizer);

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_PROMPT_FORMAT_H_
