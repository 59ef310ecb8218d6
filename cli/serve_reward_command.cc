// Placeholder: registers `reward` until its issue lands; the command fails with a clear message.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"

namespace lockstep::cli {

void AddServeRewardCommand(CLI::App* serve) {
  CLI::App* command = serve->add_subcommand("reward", "Serve a reward (issue 8) — not built yet");
  command->allow_extras();
  command->callback([] {
    std::fprintf(stderr, "lockstep: 'reward' is not built yet\n");
    std::exit(2);
  });
}

}  // namespace lockstep::cli
