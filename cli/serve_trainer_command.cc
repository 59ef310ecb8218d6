// Placeholder: registers `trainer` until its issue lands; the command fails with a clear message.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"

namespace lockstep::cli {

void AddServeTrainerCommand(CLI::App* serve) {
  CLI::App* command = serve->add_subcommand("trainer", "Serve the trainer (issue 5) — not built yet");
  command->allow_extras();
  command->callback([] {
    std::fprintf(stderr, "lockstep: 'trainer' is not built yet\n");
    std::exit(2);
  });
}

}  // namespace lockstep::cli
