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
void AddRunCommand(CLI::App& app);
void AddReportCommand(CLI::App& app);
void AddSandboxCommand(CLI::App& app);
void AddDiagnoseCommand(CLI::App& app);
void AddDataCommand(CLI::App& app);

// `lockstep serve <service>`, registered under the `serve` group.
void AddServeGeneratorCommand(CLI::App* serve);
void AddServeTrainerCommand(CLI::App* serve);
void AddServeRewardCommand(CLI::App* serve);
void AddServeSandboxCommand(CLI::App* serve);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_CLI_COMMANDS_H_
