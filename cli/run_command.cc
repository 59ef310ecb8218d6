// `lockstep run CONFIG [--set section.key=value]… [--name N]` runs an RL job (orchestrator/job.h);
// `lockstep run --resume runs/<name>` continues one from its last checkpoint.
//
// Exit status: 0 on success, 1 on an error (config errors stop the job before anything starts),
// 130 when stopped by Ctrl-C (after a checkpoint).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "orchestrator/config.h"
#include "orchestrator/job.h"
#include "orchestrator/stop_signal.h"

namespace lockstep::cli {
namespace {

struct RunFlags {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string name;
  std::string resume;
};

// This executable: the services are started from the same binary.
std::string SelfPath() {
  std::error_code error;
  std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("lockstep") : path.string();
}

absl::Status RunRun(const RunFlags& flags) {
  std::string config_path = flags.config_path;
  std::vector<std::string> overrides;
  orchestrator::JobRunOptions options;
  options.lockstep_binary = SelfPath();
  if (!flags.resume.empty()) {
    if (!config_path.empty()) {
      return absl::InvalidArgumentError("give either CONFIG or --resume RUN_DIR, not both");
    }
    config_path = (std::filesystem::path(flags.resume) / "config.toml").string();
    options.resume_dir = flags.resume;
  } else if (config_path.empty()) {
    return absl::InvalidArgumentError("a CONFIG file (or --resume RUN_DIR) is required");
  }
  if (!flags.name.empty()) overrides.push_back(absl::StrCat("job.name=\"", flags.name, "\""));
  overrides.insert(overrides.end(), flags.overrides.begin(), flags.overrides.end());
  absl::StatusOr<orchestrator::JobConfig> config =
      orchestrator::LoadJobConfig(config_path, overrides);
  if (!config.ok()) return config.status();
  orchestrator::InstallStopSignalHandlers();
  absl::StatusOr<orchestrator::JobSummary> summary = orchestrator::RunJob(*config, options);
  if (absl::IsCancelled(summary.status())) {
    std::fprintf(stderr, "lockstep run: stopped (%s); continue with: lockstep run --resume %s\n",
                 std::string(summary.status().message()).c_str(),
                 (options.resume_dir.empty() ? orchestrator::RunDirectory(*config)
                                             : options.resume_dir)
                     .c_str());
    std::exit(130);
  }
  return summary.status();
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* command = app.add_subcommand("run", "Run an RL job from a TOML config");
  command->add_option("config", flags->config_path, "Job config (TOML), e.g. configs/demo.toml");
  command->add_option("--set", flags->overrides, "Override a key: section.key=value (repeatable)");
  command->add_option("--name", flags->name, "Run name (the run directory is runs/<name>)");
  command->add_option("--resume", flags->resume, "Continue the run in this directory")
      ->check(CLI::ExistingDirectory);
  command->callback([flags] { ExitOnError(RunRun(*flags)); });
}

}  // namespace lockstep::cli
