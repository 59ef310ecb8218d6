// `lockstep data check FILE --config job.toml [--rows N] [--set section.key=value]...`: loads a
// JSONL dataset the way `lockstep run` would with that job's [data] fields and the model's chat
// template and stop tokens, and prints the first rows as the model will see them (prompt text,
// token count, answer, metadata), so that a user can look before a long run.
//
// Exit status: 0 when every row is good, 1 when any is not (each bad row named FILE:LINE) or the
// config, model or tokenizer cannot be read; a usage error exits as every subcommand's does
// (CLI11's code).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "data/jsonl_dataset.h"
#include "data/prompt_format.h"
#include "model/tokenizer/byte_tokenizer_writer.h"
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/config.h"
#include "orchestrator/task_data.h"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

struct DataCheckFlags {
  std::string file;
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t rows = 3;
};

// The model directory whose files say the template and stops: model.path, or for a preset a
// temporary directory with the byte-level tokenizer `lockstep run` would write.
absl::StatusOr<std::string> ModelDir(const orchestrator::JobConfig& config, fs::path* temporary) {
  if (!config.model.path.empty()) return config.model.path;
  *temporary = fs::temp_directory_path() / absl::StrCat("lockstep_data_check_", getpid());
  std::error_code error;
  fs::create_directories(*temporary, error);
  if (error) return absl::UnavailableError(absl::StrCat("cannot create ", temporary->string()));
  if (absl::Status s = WriteByteLevelTokenizerFiles(*temporary); !s.ok()) return s;
  return temporary->string();
}

absl::Status CheckData(const DataCheckFlags& flags, fs::path* temporary) {
  absl::StatusOr<orchestrator::JobConfig> config =
      orchestrator::LoadJobConfig(flags.config_path, flags.overrides);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::string> model_dir = ModelDir(*config, temporary);
  if (!model_dir.ok()) return model_dir.status();
  const std::string tokenizer_path =
      config->tokenizer.path.empty() ? *model_dir : config->tokenizer.path;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  // The file is checked as a JSONL set of the job, whatever its [data] task says.
  orchestrator::JobConfig as_jsonl = *config;
  as_jsonl.data.task.clear();
  absl::StatusOr<PromptFormat> format =
      orchestrator::ResolveJobPromptFormat(as_jsonl, *model_dir, tokenizer_path, **tokenizer);
  if (!format.ok()) return format.status();
  DatasetFields fields;
  fields.prompt_field = config->data.prompt_field;
  fields.answer_field = config->data.answer_field;
  absl::StatusOr<Dataset> dataset = LoadJsonlDataset(flags.file, fields);
  if (!dataset.ok()) return dataset.status();

  std::printf("%s: %zu rows, prompt_field \"%s\", answer_field \"%s\"\n", flags.file.c_str(),
              dataset->num_examples(), fields.prompt_field.c_str(), fields.answer_field.c_str());
  std::printf("%s\n", DescribePromptFormat(*format, **tokenizer).c_str());
  const size_t shown = std::min<size_t>(dataset->num_examples(), static_cast<size_t>(flags.rows));
  for (size_t i = 0; i < shown; ++i) {
    const Example& example = dataset->example(i);
    absl::StatusOr<std::string> text = PromptText(example, *format);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flags.file, ":", example.line_number, ": ", text.status().message()));
    }
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(*text);
    if (!ids.ok()) return ids.status();
    std::printf("\n--- %s:%lld ---\nprompt (%zu tokens):\n%s\n", flags.file.c_str(),
                static_cast<long long>(example.line_number), ids->size(), text->c_str());
    std::printf("answer: %s\n", example.answer.has_value() ? example.answer->c_str() : "(none)");
    if (!example.metadata.is_null()) std::printf("metadata: %s\n", example.metadata.dump().c_str());
  }
  return absl::OkStatus();
}

}  // namespace

void AddDataCommand(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Inspect datasets before a run");
  data->require_subcommand(1);
  auto flags = std::make_shared<DataCheckFlags>();
  CLI::App* check = data->add_subcommand(
      "check", "Validate a JSONL file with a job's fields and print its first rows as the model "
               "sees them (chat template applied, token count, answer)");
  check->add_option("file", flags->file, "JSONL dataset")->required();
  check->add_option("--config", flags->config_path, "Job config (TOML) whose [data], [tokenizer] "
                                                    "and [model] apply")
      ->required();
  check->add_option("--rows", flags->rows, "Rows to print")->capture_default_str();
  check->add_option("--set", flags->overrides, "Override a key: section.key=value (repeatable)");
  check->callback([flags] {
    fs::path temporary;
    absl::Status status = CheckData(*flags, &temporary);
    if (!temporary.empty()) fs::remove_all(temporary);
    std::fflush(stdout);
    if (!status.ok()) {
      std::fprintf(stderr, "lockstep data check: %s\n", std::string(status.message()).c_str());
      std::exit(1);
    }
  });
}

}  // namespace lockstep::cli
