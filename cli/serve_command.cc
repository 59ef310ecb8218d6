// `lockstep serve generator --model DIR`: serves the generator engine as lockstep.v1.Generator
// (plus the standard gRPC health service) until SIGINT or SIGTERM, then shuts down cleanly:
// in-flight streams are cancelled, the engine loop is joined.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "generator/engine_loop.h"
#include "generator/generator_service.h"
#include "model/checkpoint.h"

namespace lockstep::cli {
namespace {

struct ServeGeneratorFlags {
  ModelRunFlags run;
  std::string host = "127.0.0.1";
  int port = 0;
  int64_t kv_bytes = int64_t{256} << 20;
  int64_t max_samples = 64;
};

absl::Status RunServeGenerator(const ServeGeneratorFlags& flags) {
  // Block the stop signals before any thread starts (threads inherit the mask), so that only
  // sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModelForRun(flags.run);
  if (!model.ok()) return model.status();
  generator::EngineOptions options;
  options.kv_cache_bytes = flags.kv_bytes;
  options.max_samples_per_request = flags.max_samples;
  absl::StatusOr<std::unique_ptr<generator::Engine>> engine =
      generator::Engine::Create(*model, options);
  if (!engine.ok()) return engine.status();

  generator::EngineLoop loop(*std::move(engine));
  generator::GeneratorServiceOptions service_options;
  service_options.eos_token_id = (*model)->config().eos_token_id;
  generator::GeneratorService service(&loop, service_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat(flags.host, ":", flags.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", flags.host, ":", flags.port));
  }
  const generator::EngineLoopStatus status = loop.status();
  std::printf("lockstep generator serving %s on %s:%d (%lld KV blocks, mode %s)\n",
              flags.run.model_dir.c_str(), flags.host.c_str(), port,
              static_cast<long long>(status.num_kv_blocks), flags.run.mode.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::printf("signal %d: shutting down\n", signal_number);
  std::fflush(stdout);
  // Streams still running get a second to finish, then are cancelled (their requests aborted).
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return absl::OkStatus();  // the loop joins its thread as it goes out of scope
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  CLI::App* serve = app.add_subcommand("serve", "Run a lockstep service");
  serve->require_subcommand(1);

  auto flags = std::make_shared<ServeGeneratorFlags>();
  CLI::App* command = serve->add_subcommand(
      "generator", "Serve the generator engine over gRPC (lockstep.v1.Generator + health)");
  AddModelRunOptions(command, &flags->run);
  command->add_option("--host", flags->host, "Address to bind")->capture_default_str();
  command->add_option("--port", flags->port, "Port (0 = any free port; the bound one is printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--kv-bytes", flags->kv_bytes, "KV cache pool budget in bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--max-samples", flags->max_samples, "Limit on n per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->callback([flags] { ExitOnError(RunServeGenerator(*flags)); });
}

}  // namespace lockstep::cli
