// One rank of a data-parallel training run, for data_parallel_test: the test launches it once per
// rank with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set (or unset for a single rank).
//
//   data_parallel_driver OUT_DIR NUM_STEPS MODE(fast|batch_invariant) [BUCKET_BYTES]
//
// Every rank builds the same tiny model (fixed seed) and the same global batch per step, trains
// on its contiguous share of the batch, and after each step writes its parameters to
// OUT_DIR/rank<R>_step<S>.safetensors and a line "step loss grad_norm tokens" to
// OUT_DIR/rank<R>_metrics.txt. Exit status 0 on success; errors go to stderr.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "trainer/data_parallel.h"
#include "trainer/trainer.h"

namespace lockstep::trainer {
namespace {

constexpr int kGlobalBatch = 8;
constexpr uint64_t kModelSeed = 11;

// The global batch of step `step`: rollouts of varied lengths, sampled (by version) under the
// weights the trainer holds before that step, with positive and negative advantages.
std::vector<Rollout> GlobalBatch(int64_t step, int64_t vocab_size) {
  std::vector<Rollout> batch;
  for (int i = 0; i < kGlobalBatch; ++i) {
    Rollout rollout;
    const int prompt_length = 3 + i % 3;
    const int completion_length = 4 + i % 4;
    for (int j = 0; j < prompt_length; ++j) {
      rollout.prompt_tokens.push_back((step * 131 + i * 17 + j * 7 + 1) % vocab_size);
    }
    for (int j = 0; j < completion_length; ++j) {
      rollout.completion_tokens.push_back((step * 31 + i * 13 + j * 5 + 3) % vocab_size);
      rollout.behaviour_logprobs.push_back(-4.0f - 0.25f * static_cast<float>((i + j) % 5));
      rollout.weight_versions.push_back(step);
    }
    rollout.advantage = (i % 2 == 0 ? 1.0 : -1.0) * (0.5 + 0.125 * i);
    rollout.group_id = i / 4;
    batch.push_back(std::move(rollout));
  }
  return batch;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "data_parallel_driver: %s\n", status.ToString().c_str());
  return 1;
}

int Run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s OUT_DIR NUM_STEPS MODE [BUCKET_BYTES]\n", argv[0]);
    return 2;
  }
  const std::string out_dir = argv[1];
  const int num_steps = std::atoi(argv[2]);
  absl::StatusOr<NumericMode> mode = ParseNumericMode(argv[3]);
  if (!mode.ok()) return Fail(mode.status());
  DataParallelOptions parallel_options;
  parallel_options.timeout = std::chrono::milliseconds(30000);
  if (argc > 4) parallel_options.bucket_bytes = std::atoll(argv[4]);

  absl::StatusOr<DistributedEnv> env = DistributedEnvFromEnvironment();
  if (!env.ok()) return Fail(env.status());
  std::unique_ptr<DataParallelReducer> reducer;
  if (env->world_size > 1) {
    absl::StatusOr<std::unique_ptr<DataParallelReducer>> created =
        DataParallelReducer::Create(*env, parallel_options);
    if (!created.ok()) return Fail(created.status());
    reducer = *std::move(created);
  }

  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  ModelOptions model_options;
  model_options.numeric_mode = *mode;
  std::shared_ptr<Transformer> model = CreateRandomModel(config, kModelSeed, model_options);
  TrainerOptions options;
  options.mode = *mode;
  options.lr = 1e-3;
  options.grad_clip = 1.0;
  options.micro_batch_tokens = 24;  // several micro-batches per rank
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(model, options, reducer.get());
  if (!trainer.ok()) return Fail(trainer.status());

  if (reducer != nullptr) {
    std::vector<torch::Tensor> params;
    for (auto& [name, tensor] : (*trainer)->Parameters()) params.push_back(tensor);
    absl::Status status = reducer->BroadcastFromRankZero(params);
    if (!status.ok()) return Fail(status);
  }

  std::ofstream metrics_file(absl::StrCat(out_dir, "/rank", env->rank, "_metrics.txt"));
  for (int step = 0; step < num_steps; ++step) {
    const std::vector<Rollout> global = GlobalBatch(step, config.vocab_size);
    const size_t begin = global.size() * env->rank / env->world_size;
    const size_t end = global.size() * (env->rank + 1) / env->world_size;
    const std::vector<Rollout> shard(global.begin() + begin, global.begin() + end);
    absl::StatusOr<StepMetrics> metrics = (*trainer)->TrainStep(shard);
    if (!metrics.ok()) return Fail(metrics.status());
    metrics_file << metrics->step << " " << absl::StrCat(metrics->loss) << " "
                 << absl::StrCat(metrics->grad_norm) << " " << metrics->tokens << "\n";
    absl::Status written = WriteSafetensorsFile(
        absl::StrCat(out_dir, "/rank", env->rank, "_step", step, ".safetensors"),
        (*trainer)->Parameters());
    if (!written.ok()) return Fail(written);
  }
  std::printf("rank %d of %d: %d steps done\n", env->rank, env->world_size, num_steps);
  return 0;
}

}  // namespace
}  // namespace lockstep::trainer

int main(int argc, char** argv) { return lockstep::trainer::Run(argc, argv); }
