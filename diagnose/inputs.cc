#include "diagnose/inputs.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/int_list.h"
#include "nlohmann/json.hpp"

namespace lockstep::diagnose {
namespace {

// Token ids from `line[ids_key]`, or `line[text_key]` encoded.
absl::StatusOr<std::vector<int64_t>> Tokens(const nlohmann::json& line, const char* ids_key,
                                            const char* text_key, const Tokenizer* tokenizer) {
  if (auto it = line.find(ids_key); it != line.end()) {
    if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat("'", ids_key, "' is not a list"));
    std::vector<int64_t> ids;
    for (const auto& v : *it) {
      if (!v.is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat("'", ids_key, "' holds a non-integer"));
      }
      ids.push_back(v.get<int64_t>());
    }
    return ids;
  }
  auto it = line.find(text_key);
  if (it == line.end() || !it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("needs '", ids_key, "' (token ids) or '", text_key, "' (text)"));
  }
  if (tokenizer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text_key, "' is text, and no tokenizer was found (give --tokenizer DIR)"));
  }
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(it->get<std::string>());
  if (!ids.ok()) return ids.status();
  return std::vector<int64_t>(ids->begin(), ids->end());
}

}  // namespace

absl::StatusOr<std::vector<DiagnoseSequence>> SequencesFromTokenLists(
    const std::vector<std::string>& lists, int64_t prompt_length) {
  std::vector<DiagnoseSequence> sequences;
  for (const std::string& list : lists) {
    absl::StatusOr<std::vector<int64_t>> ids = ParseIntList(list);
    if (!ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tokens: ", ids.status().message()));
    }
    DiagnoseSequence sequence;
    sequence.tokens = *std::move(ids);
    const int64_t n = static_cast<int64_t>(sequence.tokens.size());
    sequence.prompt_length = prompt_length > 0 ? prompt_length : std::max<int64_t>(1, n / 2);
    sequences.push_back(std::move(sequence));
  }
  return sequences;
}

absl::StatusOr<SequenceFile> ReadSequenceFile(const std::filesystem::path& path,
                                              const Tokenizer* tokenizer, bool with_logprobs) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path.string()));
  SequenceFile file;
  std::string text;
  int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (absl::StripAsciiWhitespace(text).empty()) continue;
    const auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ":", number, ": ", why));
    };
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
    if (line.is_discarded() || !line.is_object()) return fail("not a JSON object");
    absl::StatusOr<std::vector<int64_t>> prompt =
        Tokens(line, "prompt_tokens", "prompt", tokenizer);
    if (!prompt.ok()) return fail(prompt.status().message());
    absl::StatusOr<std::vector<int64_t>> completion =
        Tokens(line, "completion_tokens", "completion", tokenizer);
    if (!completion.ok()) return fail(completion.status().message());
    if (prompt->empty() || completion->empty()) return fail("empty prompt or completion");
    DiagnoseSequence sequence;
    sequence.prompt_length = static_cast<int64_t>(prompt->size());
    sequence.tokens = *prompt;
    sequence.tokens.insert(sequence.tokens.end(), completion->begin(), completion->end());
    if (with_logprobs) {
      auto it = line.find("logprobs");
      if (it == line.end() || !it->is_array()) return fail("needs 'logprobs' (a list)");
      std::vector<float> logprobs;
      for (const auto& v : *it) {
        if (!v.is_number()) return fail("'logprobs' holds a non-number");
        logprobs.push_back(v.get<float>());
      }
      if (logprobs.size() != completion->size()) {
        return fail(absl::StrCat(logprobs.size(), " log-probs for ", completion->size(),
                                 " completion tokens"));
      }
      file.logprobs.push_back(std::move(logprobs));
    }
    file.sequences.push_back(std::move(sequence));
  }
  if (file.sequences.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": no sequences"));
  }
  return file;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::filesystem::path& dir,
                                                            int64_t model_vocab_size) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(dir);
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > model_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tokenizer in ", dir.string(), " has ", (*tokenizer)->vocab_size(),
        " ids but the model's vocabulary is ", model_vocab_size,
        ": they do not belong together"));
  }
  return tokenizer;
}

}  // namespace lockstep::diagnose
