// `lockstep serve trainer --model DIR`: serves the trainer as lockstep.v1.Trainer (plus the
// standard gRPC health service) until SIGINT or SIGTERM.
//
//   lockstep serve trainer --model DIR [--mode fast|batch_invariant] [--options FILE.json]
//       [--checkpoint-dir DIR] [--keep-last K] [--resume PATH] [--host H] [--port P]
//       [--auth-token-file FILE]
//
// --options is the trainer options JSON (trainer/trainer_options.h; the orchestrator writes it).
// --mode, --checkpoint-dir and --keep-last, when given, override the file. --resume loads a
// checkpoint (a step directory, or a checkpoint root meaning its latest valid step); GetStatus then
// reports its data cursor.
//
// Data parallel: the service runs a single rank. Multi-rank serving (rank 0 serving gRPC and
// fanning each batch out to the other ranks) is a follow-up, so WORLD_SIZE > 1 is refused here;
// trainer/data_parallel.h is the library the other ranks would use.
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/serve_util.h"
#include "common/openmp_wait.h"
#include "trainer/data_parallel.h"
#include "trainer/trainer.h"
#include "trainer/trainer_options.h"
#include "trainer/trainer_service.h"

namespace lockstep::cli {
namespace {

struct ServeTrainerFlags {
  ModelRunFlags run;
  ServeFlags serve;
  std::string options_file;
  std::string checkpoint_dir;
  int64_t keep_last = -1;  // -1: as in the options
  std::string resume;
  bool mode_given = false;  // --mode on the command line overrides the options file
};

absl::StatusOr<trainer::TrainerOptions> LoadTrainerOptions(const ServeTrainerFlags& flags) {
  trainer::TrainerOptions options;
  if (!flags.options_file.empty()) {
    std::ifstream file(flags.options_file);
    if (!file) {
      return absl::NotFoundError(absl::StrCat("--options: cannot read ", flags.options_file));
    }
    std::stringstream text;
    text << file.rdbuf();
    absl::StatusOr<trainer::TrainerOptions> parsed = trainer::TrainerOptionsFromJson(text.str());
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat(flags.options_file, ": ", parsed.status().message()));
    }
    options = *parsed;
  }
  if (flags.mode_given || flags.options_file.empty()) {
    absl::StatusOr<NumericMode> mode = ParseNumericMode(flags.run.mode);
    if (!mode.ok()) return mode.status();
    options.mode = *mode;
  }
  if (!flags.checkpoint_dir.empty()) options.checkpoint_dir = flags.checkpoint_dir;
  if (flags.keep_last >= 0) options.keep_last = flags.keep_last;
  // Checkpoints carry the tokenizer when the model directory has one.
  if (options.tokenizer_dir.empty() &&
      std::filesystem::exists(std::filesystem::path(flags.run.model_dir) / "tokenizer.json")) {
    options.tokenizer_dir = flags.run.model_dir;
  }
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  return options;
}

absl::Status RunServeTrainer(ServeTrainerFlags flags) {
  const sigset_t stop_signals = BlockStopSignals();
  absl::StatusOr<trainer::DistributedEnv> env = trainer::DistributedEnvFromEnvironment();
  if (!env.ok()) return env.status();
  if (env->world_size > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "WORLD_SIZE=", env->world_size,
        ": the trainer service runs a single rank for now (multi-rank serving is a follow-up)"));
  }
  absl::StatusOr<std::string> token = LoadAuthToken(flags.serve);
  if (!token.ok()) return token.status();
  absl::StatusOr<trainer::TrainerOptions> options = LoadTrainerOptions(flags);
  if (!options.ok()) return options.status();
  flags.run.mode = NumericModeName(options->mode);  // the model runs in the trainer's mode
  absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModelForRun(flags.run);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<trainer::Trainer>> trainer =
      trainer::Trainer::Create(*model, *options);
  if (!trainer.ok()) return trainer.status();
  if (!flags.resume.empty()) {
    absl::Status loaded = (*trainer)->LoadCheckpoint(flags.resume);
    if (!loaded.ok()) return loaded;
  }

  trainer::TrainerServiceOptions service_options;
  service_options.auth_token = *token;
  trainer::TrainerService service(trainer->get(), service_options);
  std::printf(
      "trainer: %s, %.1fM parameters, mode %s, %d threads, OpenMP wait: %s, step %lld, "
      "weight version %lld%s%s\n",
      flags.run.model_dir.c_str(), (*model)->config().NumParameters() / 1e6,
      NumericModeName(options->mode), static_cast<int>(torch::get_num_threads()),
      OpenMpWaitPolicy().c_str(),
      static_cast<long long>((*trainer)->step()),
      static_cast<long long>((*trainer)->weight_version()),
      flags.resume.empty() ? "" : ", resumed from ", (*trainer)->resumed_from().c_str());
  // A step still running at shutdown finishes first (the service's worker runs it to the end).
  return ServeUntilSignal(flags.serve, {&service}, "trainer", stop_signals);
}

}  // namespace

void AddServeTrainerCommand(CLI::App* serve) {
  auto flags = std::make_shared<ServeTrainerFlags>();
  CLI::App* command = serve->add_subcommand(
      "trainer", "Serve the trainer over gRPC (lockstep.v1.Trainer + health)");
  AddModelRunOptions(command, &flags->run);
  AddServeOptions(command, &flags->serve);
  command->add_option("--options", flags->options_file, "Trainer options JSON")
      ->check(CLI::ExistingFile);
  command->add_option("--checkpoint-dir", flags->checkpoint_dir,
                      "Where SaveCheckpoint writes step directories (overrides --options)");
  command
      ->add_option("--keep-last", flags->keep_last,
                   "Step directories kept, 0 = all (overrides --options)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--resume", flags->resume,
                   "Checkpoint to resume from: a step directory or a checkpoint root")
      ->check(CLI::ExistingDirectory);
  command->callback([flags, command] {
    flags->mode_given = command->count("--mode") > 0;
    ExitOnError(RunServeTrainer(*flags));
  });
}

}  // namespace lockstep::cli
