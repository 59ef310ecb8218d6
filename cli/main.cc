// `lockstep`: one binary, one subcommand per job (see `lockstep --help`).
#include "CLI/CLI.hpp"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"lockstep: RL post-training of language models with bit-exact trainer/generator parity"};
  app.require_subcommand(1);
  lockstep::cli::AddInitModelCommand(app);
  lockstep::cli::AddForwardCommand(app);
  lockstep::cli::AddTokenizeCommand(app);
  lockstep::cli::AddGenerateCommand(app);
  lockstep::cli::AddServeCommand(app);
  lockstep::cli::AddRunCommand(app);
  lockstep::cli::AddReportCommand(app);
  lockstep::cli::AddSandboxCommand(app);
  lockstep::cli::AddDiagnoseCommand(app);
  lockstep::cli::AddDataCommand(app);
  // Subcommands run (and exit with their own codes) inside parse. A usage error (unknown flag,
  // bad value, missing subcommand) exits 2 with CLI11's message, for every subcommand alike.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return 0;
}
