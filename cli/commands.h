// Subcommands of the `lockstep` binary. Each Add*Command registers one CLI11 subcommand whose
// callback does the work and exits the process with a non-zero status on error.
#ifndef LOCKSTEP_CLI_COMMANDS_H_
#define LOCKSTEP_CLI_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace lockstep::cli {

void AddInitModelCommand(CLI::App& app);
void AddForwardCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_CLI_COMMANDS_H_
