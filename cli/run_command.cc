// Placeholder: registers `run` until its issue lands; the command fails with a clear message.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"

namespace lockstep::cli {

void AddRunCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand("run", "Run an RL job (issue 7) — not built yet");
  command->allow_extras();
  command->callback([] {
    std::fprintf(stderr, "lockstep: 'run' is not built yet\n");
    std::exit(2);
  });
}

}  // namespace lockstep::cli
