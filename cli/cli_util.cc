#include "cli/cli_util.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/checkpoint.h"
#include "model/compute_threads.h"

namespace lockstep::cli {

void ExitOnError(const absl::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
  std::fflush(stdout);
  std::exit(1);
}

void AddModelRunOptions(CLI::App* command, ModelRunFlags* flags) {
  command->add_option("--model", flags->model_dir, "Model directory (Hugging Face layout)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--mode", flags->mode, "Numeric mode")
      ->check(CLI::IsMember({"fast", "batch_invariant"}))
      ->capture_default_str();
  command->add_option(
      "--threads", flags->threads,
      "Intra-op threads (0 = the physical cores this process may use; LibTorch's count if "
      "OMP_NUM_THREADS is set)");
}

absl::StatusOr<std::shared_ptr<Transformer>> LoadModelForRun(const ModelRunFlags& flags) {
  SetComputeThreads(flags.threads);
  absl::StatusOr<NumericMode> mode = ParseNumericMode(flags.mode);
  if (!mode.ok()) return mode.status();
  ModelOptions options;
  options.numeric_mode = *mode;
  return LoadModel(flags.model_dir, options);
}

}  // namespace lockstep::cli
