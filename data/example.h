// One example of a prompt dataset: a prompt (plain string or chat messages), an optional
// reference answer and free-form metadata. See data/README.md for the JSONL format.
#ifndef LOCKSTEP_DATA_EXAMPLE_H_
#define LOCKSTEP_DATA_EXAMPLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/chat_template.h"
#include "nlohmann/json.hpp"

namespace lockstep {

// Where a row keeps its prompt and reference answer. A field is a top-level key or a dotted path
// into nested objects ("reward_model.ground_truth"); a key that itself contains the dot wins.
struct DatasetFields {
  // A string (a plain prompt) or a non-empty list of {"role", "content"} messages. With the
  // default name a row may give `messages` instead.
  std::string prompt_field = "prompt";
  // A string. Optional under the default name "answer"; any other name must be in every row.
  std::string answer_field = "answer";
};

struct Example {
  // Exactly one of `prompt` and `messages` is set.
  std::optional<std::string> prompt;
  std::vector<ChatMessage> messages;
  std::optional<std::string> answer;
  nlohmann::json metadata;  // Null when absent.
  int64_t line_number = 0;  // 1-based line in the source file, for messages to the user.
};

// Parses one JSON object (a dataset line). Top-level keys other than the prompt, the answer and
// `metadata` are passed through as members of `metadata` (which must then be an object; its
// own members win). Errors say what is wrong, without file or line (the caller adds them).
absl::StatusOr<Example> ParseExample(const nlohmann::json& object,
                                     const DatasetFields& fields = {});

// `metadata` as rewards receive it: each member of an object, strings as they are and other
// values as JSON text; empty for anything but an object.
std::map<std::string, std::string> MetadataStrings(const Example& example);

// The text the model is prompted with. A `prompt` string is sent as one user message for chat
// families and as-is for the plain family; `messages` are rendered by the chat template.
absl::StatusOr<std::string> RenderPrompt(const Example& example, ChatTemplateFamily family,
                                         const ChatTemplateOptions& options = {});

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_EXAMPLE_H_
