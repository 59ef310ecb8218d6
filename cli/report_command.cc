// `lockstep report RUN_DIR [--out FILE]`: writes the run's self-contained HTML report.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "orchestrator/report.h"

namespace lockstep::cli {

void AddReportCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "report", "Write a self-contained HTML report of a run (curves, parity, speed, staleness)");
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  command->add_option("run_dir", *run_dir, "Run directory (runs/<name>)")->required();
  command->add_option("--out", *out, "Output file (default RUN_DIR/report.html)");
  command->callback([run_dir, out] {
    absl::StatusOr<std::string> path = orchestrator::WriteReport(*run_dir, *out);
    if (!path.ok()) {
      std::fprintf(stderr, "lockstep report: %s\n", std::string(path.status().message()).c_str());
      std::exit(1);
    }
    std::printf("wrote %s\n", path->c_str());
  });
}

}  // namespace lockstep::cli
