// Placeholder: registers `report` until its issue lands; the command fails with a clear message.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"

namespace lockstep::cli {

void AddReportCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand("report", "Write a run report (issue 7) — not built yet");
  command->allow_extras();
  command->callback([] {
    std::fprintf(stderr, "lockstep: 'report' is not built yet\n");
    std::exit(2);
  });
}

}  // namespace lockstep::cli
