// `lockstep diagnose`: runs sequences down two execution paths (default: the trainer's forward
// and the generator's prefill + decode, in the model's mode) and says where their log-probs
// part: sampled tokens, the whole vocabulary, and the first op whose output differs while its
// inputs were bit-identical. Exit code 0: identical in every bit; 1: A and B differ; 2: bad
// input or a failure (nothing written).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "common/file_io.h"
#include "diagnose/diagnose.h"
#include "diagnose/inputs.h"
#include "diagnose/replay.h"
#include "diagnose/report_html.h"
#include "model/config.h"

namespace lockstep::cli {
namespace {

constexpr int kExitBadInput = 2;

struct DiagnoseFlags {
  std::string run_dir;
  std::string model_dir;
  std::vector<std::string> tokens;
  int64_t prompt_length = 0;
  std::string prompts, behaviour, tokenizer;
  std::string a, b;
  std::string mode = "batch_invariant";
  int threads = 0;
  double temperature = 1.0;
  int64_t top_k = 5;
  int64_t step = -1;
  std::string json, html;
};

void Progress(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

absl::StatusOr<diagnose::DiagnoseReport> RunFromFlags(const DiagnoseFlags& flags) {
  const int sources = !flags.run_dir.empty() + !flags.tokens.empty() + !flags.prompts.empty() +
                      !flags.behaviour.empty();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of: a run directory, --tokens, --prompts FILE, --behaviour FILE");
  }
  if (!flags.run_dir.empty()) {
    if (!flags.model_dir.empty()) {
      return absl::InvalidArgumentError(
          "a run directory names its own weights: leave out --model");
    }
    diagnose::ReplayRequest replay;
    replay.run_dir = flags.run_dir;
    if (flags.step >= 0) replay.step = flags.step;
    replay.a_overrides = flags.a;
    replay.b_overrides = flags.b;
    replay.top_k = flags.top_k;
    replay.progress = Progress;
    return diagnose::ReplayRun(replay);
  }
  if (flags.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  absl::StatusOr<ModelConfig> config = LoadConfig(flags.model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<NumericMode> mode = ParseNumericMode(flags.mode);
  if (!mode.ok()) return mode.status();

  diagnose::DiagnoseRequest request;
  request.model_dir = flags.model_dir;
  request.temperature = flags.temperature;
  request.top_k = flags.top_k;
  request.progress = Progress;
  diagnose::PathSettings base_a;
  base_a.mode = *mode;
  base_a.threads = flags.threads;
  diagnose::PathSettings base_b = diagnose::DefaultGeneratePath(*mode);
  base_b.threads = flags.threads;
  absl::StatusOr<diagnose::PathSettings> a = diagnose::ParsePathSettings(flags.a, base_a);
  if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat("--a: ", a.status().message()));
  absl::StatusOr<diagnose::PathSettings> b = diagnose::ParsePathSettings(flags.b, base_b);
  if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat("--b: ", b.status().message()));
  request.a = *a;
  request.b = *b;

  if (!flags.tokens.empty()) {
    absl::StatusOr<std::vector<diagnose::DiagnoseSequence>> sequences =
        diagnose::SequencesFromTokenLists(flags.tokens, flags.prompt_length);
    if (!sequences.ok()) return sequences.status();
    request.sequences = *std::move(sequences);
    return diagnose::Diagnose(request);
  }
  // Files may hold text: the tokenizer is --tokenizer, else the model's own if it has one.
  std::unique_ptr<Tokenizer> tokenizer;
  const std::string tokenizer_dir = flags.tokenizer.empty() ? flags.model_dir : flags.tokenizer;
  const bool has_tokenizer = !flags.tokenizer.empty() ||
                             std::filesystem::exists(std::filesystem::path(tokenizer_dir) /
                                                     "tokenizer.json");
  if (has_tokenizer) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
        diagnose::LoadTokenizerFor(tokenizer_dir, config->vocab_size);
    if (!loaded.ok()) return loaded.status();
    tokenizer = *std::move(loaded);
  }
  const bool behaviour = !flags.behaviour.empty();
  absl::StatusOr<diagnose::SequenceFile> file = diagnose::ReadSequenceFile(
      behaviour ? flags.behaviour : flags.prompts, tokenizer.get(), behaviour);
  if (!file.ok()) return file.status();
  request.sequences = std::move(file->sequences);
  if (behaviour) return diagnose::DiagnoseBehaviour(request, file->logprobs, flags.behaviour);
  return diagnose::Diagnose(request);
}

[[noreturn]] void Fail(const absl::Status& status) {
  std::fprintf(stderr, "lockstep diagnose: %s\n", std::string(status.message()).c_str());
  std::exit(kExitBadInput);
}

void RunDiagnose(const DiagnoseFlags& flags) {
  absl::StatusOr<diagnose::DiagnoseReport> report = RunFromFlags(flags);
  if (!report.ok()) Fail(report.status());
  if (!flags.json.empty()) {
    absl::Status s =
        WriteFileAtomically(flags.json, diagnose::ReportToJson(*report).dump(2) + "\n");
    if (!s.ok()) Fail(s);
  }
  if (!flags.html.empty()) {
    absl::Status s = WriteFileAtomically(flags.html, diagnose::ReportToHtml(*report));
    if (!s.ok()) Fail(s);
  }
  std::printf("%s", diagnose::ReportToText(*report).c_str());
  std::fflush(stdout);
  std::exit(report->identical ? 0 : 1);
}

}  // namespace

void AddDiagnoseCommand(CLI::App& app) {
  auto flags = std::make_shared<DiagnoseFlags>();
  CLI::App* command = app.add_subcommand(
      "diagnose",
      "Compare trainer and generator log-probs (or any two execution paths) and name the first "
      "op where they part. Exit 0 identical, 1 different, 2 bad input");
  command->add_option("run_dir", flags->run_dir,
                      "Run directory (runs/<name>): replay its recorded mismatches");
  command->add_option("--model", flags->model_dir, "Model directory (Hugging Face layout)");
  command->add_option("--tokens", flags->tokens,
                      "Token ids of one sequence, comma-separated; repeat for more");
  command->add_option("--prompt-length", flags->prompt_length,
                      "With --tokens: prompt tokens of each sequence (default half)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--prompts", flags->prompts,
                      "JSONL: prompt_tokens + completion_tokens, or prompt + completion text");
  command->add_option("--behaviour", flags->behaviour,
                      "JSONL as --prompts plus logprobs from another engine: compare path A "
                      "with them");
  command->add_option("--tokenizer", flags->tokenizer,
                      "Tokenizer directory for text in files (default: the model's)");
  command->add_option("--a", flags->a,
                      "Path A settings: path=train|generate,mode=..,threads=N,dtype=..,pack=N,"
                      "chunk=N,batch=N (default path=train)");
  command->add_option("--b", flags->b, "Path B settings (default path=generate)");
  command->add_option("--mode", flags->mode, "Numeric mode of both paths unless --a/--b say")
      ->check(CLI::IsMember({"fast", "batch_invariant"}))
      ->capture_default_str();
  command->add_option("--threads", flags->threads,
                      "Threads of both paths unless --a/--b say (0 = physical cores)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--temperature", flags->temperature,
                      "Log-probs of softmax(logits / T)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--top-k", flags->top_k, "k of the vocabulary's top-k agreement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--step", flags->step, "With a run directory: the step to replay");
  command->add_option("--json", flags->json, "Write the report as JSON here");
  command->add_option("--html", flags->html, "Write a self-contained HTML report here");
  command->callback([flags] { RunDiagnose(*flags); });
}

}  // namespace lockstep::cli
