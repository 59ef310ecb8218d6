// `lockstep serve {generator|trainer|reward|environment|sandbox}`: each service has its own
// file; this only groups them under one subcommand.
#include "cli/commands.h"

namespace lockstep::cli {

void AddServeCommand(CLI::App& app) {
  CLI::App* serve = app.add_subcommand("serve", "Run a lockstep service");
  serve->require_subcommand(1);
  AddServeGeneratorCommand(serve);
  AddServeTrainerCommand(serve);
  AddServeRewardCommand(serve);
  AddServeSandboxCommand(serve);
}

}  // namespace lockstep::cli
