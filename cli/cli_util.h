// Small helpers shared by the subcommands.
#ifndef LOCKSTEP_CLI_CLI_UTIL_H_
#define LOCKSTEP_CLI_CLI_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/transformer.h"

namespace lockstep::cli {

// Prints "error: <status>" to stderr and exits with status 1 unless `status` is OK.
void ExitOnError(const absl::Status& status);

// Flags of every subcommand that loads and runs a model.
struct ModelRunFlags {
  std::string model_dir;
  std::string mode = "fast";  // NumericMode name
  int threads = 0;            // intra-op threads, 0 = DefaultComputeThreads()
};

// Registers --model (required, existing directory), --mode and --threads on `command`.
void AddModelRunOptions(CLI::App* command, ModelRunFlags* flags);

// Applies --threads, then loads the model from --model in the --mode numeric mode.
absl::StatusOr<std::shared_ptr<Transformer>> LoadModelForRun(const ModelRunFlags& flags);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_CLI_CLI_UTIL_H_
