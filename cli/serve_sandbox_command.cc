// `lockstep serve sandbox [--max-concurrency N] [--max-queue N] [--no-cgroups]`: serves the
// in-process sandbox as lockstep.v1.Sandbox (sandbox/sandbox_service.h) with the standard health
// service; binds 127.0.0.1 unless told otherwise, checks the job's token when --auth-token-file
// is given, and stops on SIGINT/SIGTERM after the programs running have ended.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/serve_util.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_service.h"

namespace lockstep::cli {
namespace {

struct ServeSandboxFlags {
  ServeFlags serve;
  int max_concurrency = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int max_queue = 64;
  bool no_cgroups = false;
};

absl::Status RunServeSandbox(const ServeSandboxFlags& flags) {
  const sigset_t stop_signals = BlockStopSignals();
  absl::StatusOr<std::string> token = LoadAuthToken(flags.serve);
  if (!token.ok()) return token.status();
  sandbox::SandboxOptions sandbox_options;
  sandbox_options.use_cgroups = !flags.no_cgroups;
  // One warm init per slot, so that a full set of concurrent calls all start warm.
  sandbox_options.warm_inits = std::max(sandbox_options.warm_inits, flags.max_concurrency);
  absl::StatusOr<std::unique_ptr<sandbox::Sandbox>> box =
      sandbox::Sandbox::Create(sandbox_options);
  if (!box.ok()) return box.status();
  for (const std::string& line : (*box)->isolation().lines) std::printf("%s\n", line.c_str());
  absl::StatusOr<std::unique_ptr<sandbox::SandboxService>> service =
      sandbox::SandboxService::Create(std::shared_ptr<sandbox::Executor>(*std::move(box)),
                                      {.token = *token,
                                       .max_concurrency = flags.max_concurrency,
                                       .max_queue = flags.max_queue});
  if (!service.ok()) return service.status();
  std::printf("sandbox: max_concurrency %d, max_queue %d\n", flags.max_concurrency,
              flags.max_queue);
  return ServeUntilSignal(flags.serve, {service->get()}, "sandbox", stop_signals);
}

}  // namespace

void AddServeSandboxCommand(CLI::App* serve) {
  auto flags = std::make_shared<ServeSandboxFlags>();
  CLI::App* command = serve->add_subcommand(
      "sandbox", "Serve the sandbox over gRPC (lockstep.v1.Sandbox + health)");
  command
      ->add_option("--max-concurrency", flags->max_concurrency,
                   "Programs running at once (default: the number of CPUs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--max-queue", flags->max_queue,
                   "Calls waiting for a free slot at most; beyond it calls fail with "
                   "RESOURCE_EXHAUSTED")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_flag("--no-cgroups", flags->no_cgroups,
                    "Do not use cgroups even where writable (rlimits only)");
  AddServeOptions(command, &flags->serve);
  command->callback([flags] { ExitOnError(RunServeSandbox(*flags)); });
}

}  // namespace lockstep::cli
