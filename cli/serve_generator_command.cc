// `lockstep serve generator --model DIR`: serves the generator engine as lockstep.v1.Generator
// (plus the standard gRPC health service) until SIGINT or SIGTERM, then shuts down cleanly:
// in-flight streams are cancelled, the engine loop is joined.
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/serve_util.h"
#include "generator/engine_loop.h"
#include "generator/generator_service.h"
#include "model/checkpoint.h"

namespace lockstep::cli {
namespace {

struct ServeGeneratorFlags {
  ModelRunFlags run;
  ServeFlags serve;
  int64_t kv_bytes = int64_t{256} << 20;
  int64_t max_samples = 64;
};

absl::Status RunServeGenerator(const ServeGeneratorFlags& flags) {
  const sigset_t stop_signals = BlockStopSignals();
  absl::StatusOr<std::string> token = LoadAuthToken(flags.serve);
  if (!token.ok()) return token.status();
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
  service_options.auth_token = *token;
  // Weight sync (JoinWeightSync / ReceiveWeights): the model's parameter set and dtype.
  service_options.weight_manifest = weight_sync::ManifestOf(StateDict(**model));
  service_options.weight_dtype = (*model)->options().compute_dtype;
  absl::StatusOr<int> weight_device = weight_sync::WeightsCudaDevice(StateDict(**model));
  if (!weight_device.ok()) return weight_device.status();
  service_options.weight_cuda_device = *weight_device;
  generator::GeneratorService service(&loop, service_options);
  std::printf("generator: %s, %lld KV blocks, mode %s, %d threads\n", flags.run.model_dir.c_str(),
              static_cast<long long>(loop.status().num_kv_blocks), flags.run.mode.c_str(),
              static_cast<int>(torch::get_num_threads()));
  // Streams still running at shutdown get a second to finish, then are cancelled (their
  // requests aborted); the loop joins its thread as it goes out of scope.
  return ServeUntilSignal(flags.serve, {&service}, "generator", stop_signals);
}

}  // namespace

void AddServeGeneratorCommand(CLI::App* serve) {
  auto flags = std::make_shared<ServeGeneratorFlags>();
  CLI::App* command = serve->add_subcommand(
      "generator", "Serve the generator engine over gRPC (lockstep.v1.Generator + health)");
  AddModelRunOptions(command, &flags->run);
  AddServeOptions(command, &flags->serve);
  command->add_option("--kv-bytes", flags->kv_bytes, "KV cache pool budget in bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--max-samples", flags->max_samples, "Limit on n per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->callback([flags] { ExitOnError(RunServeGenerator(*flags)); });
}

}  // namespace lockstep::cli
