// `lockstep generate --model DIR --prompt "..."`: runs the generator engine in-process on one
// prompt and prints each of the `n` completions with its finish reason and mean log-prob.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_util.h"
#include "common/int_list.h"
#include "cli/commands.h"
#include "generator/engine.h"
#include "model/checkpoint.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace lockstep::cli {
namespace {

struct GenerateFlags {
  ModelRunFlags run;
  std::string prompt;
  std::string prompt_ids;
  int64_t n = 4;
  double temperature = 0.8;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t max_tokens = 64;
  uint64_t seed = 1;
  int64_t kv_bytes = int64_t{256} << 20;
};

// Shows control characters and invalid UTF-8 as JSON escapes, so a completion is one line.
std::string Quote(const std::string& bytes) {
  return nlohmann::json(bytes).dump(-1, ' ', /*ensure_ascii=*/false,
                                    nlohmann::json::error_handler_t::replace);
}

absl::Status RunGenerate(const GenerateFlags& flags) {
  absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModelForRun(flags.run);
  if (!model.ok()) return model.status();

  // The tokenizer, when the model directory has one.
  std::unique_ptr<Tokenizer> tokenizer;
  if (std::filesystem::exists(std::filesystem::path(flags.run.model_dir) / "tokenizer.json")) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded = Tokenizer::FromFile(flags.run.model_dir);
    if (!loaded.ok()) return loaded.status();
    tokenizer = *std::move(loaded);
  }

  generator::Request request;
  if (!flags.prompt_ids.empty()) {
    absl::StatusOr<std::vector<int64_t>> ids = ParseIntList(flags.prompt_ids);
    if (!ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--prompt-ids: ", ids.status().message()));
    }
    request.prompt = *std::move(ids);
  } else if (!flags.prompt.empty()) {
    if (tokenizer == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(flags.run.model_dir, " has no tokenizer.json: pass --prompt-ids instead"));
    }
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(flags.prompt);
    if (!ids.ok()) return ids.status();
    request.prompt.assign(ids->begin(), ids->end());
  } else {
    return absl::InvalidArgumentError("give --prompt or --prompt-ids");
  }
  request.n = flags.n;
  request.seed = flags.seed;
  request.params.temperature = flags.temperature;
  request.params.top_p = flags.top_p;
  request.params.top_k = flags.top_k;
  request.params.max_tokens = flags.max_tokens;
  request.params.eos_token_id = (*model)->config().eos_token_id;

  generator::EngineOptions options;
  options.kv_cache_bytes = flags.kv_bytes;
  options.max_samples_per_request = std::max<int64_t>(options.max_samples_per_request, flags.n);
  absl::StatusOr<std::unique_ptr<generator::Engine>> engine =
      generator::Engine::Create(*model, options);
  if (!engine.ok()) return engine.status();
  if (absl::StatusOr<int64_t> id = (*engine)->AddRequest(request); !id.ok()) return id.status();

  std::map<int64_t, generator::SampleOutput> samples;
  while ((*engine)->HasUnfinished()) {
    absl::StatusOr<std::vector<generator::SampleOutput>> finished = (*engine)->Step();
    if (!finished.ok()) return finished.status();
    for (generator::SampleOutput& sample : *finished) {
      samples[sample.sample_index] = std::move(sample);
    }
  }

  std::printf("prompt: %zu tokens\n", request.prompt.size());
  for (const auto& [index, sample] : samples) {
    double sum_logprob = 0;
    for (float logprob : sample.logprobs) sum_logprob += logprob;
    const double mean = sample.logprobs.empty() ? 0.0 : sum_logprob / sample.logprobs.size();
    std::printf("sample %lld (%s, %zu tokens, mean logprob %.4f): ", static_cast<long long>(index),
                generator::FinishReasonName(sample.finish_reason), sample.tokens.size(), mean);
    if (tokenizer != nullptr) {
      // A random model's vocabulary can be larger than its tokenizer's: such ids print as <id>.
      std::string text;
      for (int64_t id : sample.tokens) {
        absl::StatusOr<std::string_view> bytes =
            id < tokenizer->vocab_size() ? tokenizer->TokenBytes(static_cast<int32_t>(id))
                                         : absl::OutOfRangeError("");
        if (bytes.ok()) {
          text.append(bytes->data(), bytes->size());
        } else {
          absl::StrAppend(&text, "<", id, ">");
        }
      }
      std::printf("%s\n", Quote(text).c_str());
    } else {
      std::printf("%s\n", nlohmann::json(sample.tokens).dump().c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* command = app.add_subcommand(
      "generate", "Sample n completions of one prompt with the in-process generator engine");
  AddModelRunOptions(command, &flags->run);
  auto* prompt = command->add_option("--prompt", flags->prompt,
                                     "Prompt text (needs tokenizer.json in the model directory)");
  command->add_option("--prompt-ids", flags->prompt_ids, "Prompt as token ids, comma-separated")
      ->excludes(prompt);
  command->add_option("--n", flags->n, "Samples of the prompt")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--temperature", flags->temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--top-p", flags->top_p, "Nucleus sampling (1 = off)")->capture_default_str();
  command->add_option("--top-k", flags->top_k, "Top-k sampling (0 = off)")->capture_default_str();
  command->add_option("--max-tokens", flags->max_tokens, "Generated tokens per sample at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--seed", flags->seed, "Sampling seed")->capture_default_str();
  command->add_option("--kv-bytes", flags->kv_bytes, "KV cache pool budget in bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->callback([flags] { ExitOnError(RunGenerate(*flags)); });
}

}  // namespace lockstep::cli
