// bench_checkpoint: how long a background checkpoint holds the trainer, next to one memcpy of
// the same state, at several model sizes.
//   build/bench/bench_checkpoint [--presets tiny,small,base] [--repeats 3] [--json FILE]
//       [--dir /tmp]
// Per preset: a fast-mode trainer of a random Qwen3 takes one step (so AdamW has its state),
// then 1 + --repeats background saves (Trainer::SaveCheckpoint(cursor, background=true)), each
// after the previous write finished. blocking_ms = the call's time (copy of weights + AdamW
// state into the snapshot buffers, which Trainer::Create reserved); first_blocking_ms = the
// first save's, reported apart (it is the one that used to allocate and fault in the buffers);
// blocking_ms = the best later save; write_ms = the background write (files, fsync, SHA-256
// manifest, rename). memcpy_ms = std::memcpy of the same bytes into warm buffers (best of
// --repeats, back to back: from cache when the state fits L3); cold_memcpy_ms = the same with
// the caches evicted before each repeat. Goal: blocking / memcpy <= 2 at any save, the first
// included (issue 21).
// JSON: {"presets": [{preset, parameters, state_bytes, memcpy_ms, cold_memcpy_ms, blocking_ms,
// first_blocking_ms, first_allocated_bytes, write_ms, blocking_vs_memcpy,
// first_blocking_vs_memcpy, worst_blocking_vs_cold_memcpy}]}.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "model/checkpoint.h"
#include "nlohmann/json.hpp"
#include "trainer/trainer.h"

namespace lockstep::bench {
namespace {

namespace fs = std::filesystem;

struct PresetResult {
  std::string preset;
  int64_t parameters = 0;
  int64_t state_bytes = 0;
  double memcpy_ms = 1e30;          // best of the repeats
  double cold_memcpy_ms = 1e30;     // best of the repeats, caches evicted before each
  double blocking_ms = 1e30;        // best warm save (buffers exist)
  double first_blocking_ms = 0;     // the first save (into the buffers reserved by Create)
  int64_t first_allocated_bytes = 0;  // snapshot memory the first save allocated (0: reserved)
  double write_ms = 0;              // median background write
};

std::vector<trainer::Rollout> OneBatch(int64_t vocab, int64_t version) {
  std::vector<trainer::Rollout> batch;
  for (int64_t s = 0; s < 2; ++s) {
    trainer::Rollout rollout;
    for (int64_t t = 0; t < 32; ++t) {
      const int64_t token = (s * 7919 + t * 104729) % vocab;
      if (t < 8) {
        rollout.prompt_tokens.push_back(token);
      } else {
        rollout.completion_tokens.push_back(token);
        rollout.behaviour_logprobs.push_back(-10.0f);
        rollout.weight_versions.push_back(version);
      }
    }
    rollout.advantage = s == 0 ? 1.0 : -1.0;
    batch.push_back(std::move(rollout));
  }
  return batch;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Best time of `repeats` std::memcpy of every tensor into warm buffers of the same sizes. With
// `cold`, each repeat first writes a 128 MiB scratch buffer, so that neither the state nor the
// buffers are in the caches (as after a training step or a background write); without, repeats
// run back to back and a state smaller than L3 (tiny: 10 MiB) copies from cache.
double MemcpyMs(const std::vector<torch::Tensor>& tensors, int repeats, bool cold) {
  std::vector<std::vector<char>> buffers;
  for (const torch::Tensor& t : tensors) buffers.emplace_back(t.nbytes(), 1);  // touched
  std::vector<char> scratch(cold ? size_t{128} << 20 : 0);
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    if (cold) std::memset(scratch.data(), r + 2, scratch.size());
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::memcpy(buffers[i].data(), tensors[i].data_ptr(), tensors[i].nbytes());
    }
    best = std::min(best, MsSince(start));
  }
  return best;
}

absl::StatusOr<PresetResult> RunPreset(const std::string& preset, const fs::path& dir,
                                       int repeats) {
  absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, preset);
  if (!config.ok()) return config.status();
  ModelOptions model_options;
  model_options.numeric_mode = NumericMode::kFast;
  trainer::TrainerOptions options;
  options.mode = NumericMode::kFast;
  options.lr = 1e-5;
  options.checkpoint_dir = dir.string();
  options.keep_last = 1;
  absl::StatusOr<std::unique_ptr<trainer::Trainer>> trainer =
      trainer::Trainer::Create(CreateRandomModel(*config, /*seed=*/0, model_options), options);
  if (!trainer.ok()) return trainer.status();
  absl::StatusOr<trainer::StepMetrics> step =
      (*trainer)->TrainStep(OneBatch(config->vocab_size, 0));
  if (!step.ok()) return step.status();

  PresetResult result;
  result.preset = preset;
  result.parameters = config->NumParameters();
  std::vector<torch::Tensor> state;
  for (const auto& [name, t] : (*trainer)->Parameters()) state.push_back(t.detach().contiguous());
  for (const auto& [name, t] : (*trainer)->OptimizerState()) state.push_back(t.contiguous());
  for (const torch::Tensor& t : state) result.state_bytes += static_cast<int64_t>(t.nbytes());
  result.memcpy_ms = MemcpyMs(state, repeats, /*cold=*/false);
  result.cold_memcpy_ms = MemcpyMs(state, repeats, /*cold=*/true);

  std::vector<double> writes;
  for (int r = 0; r <= repeats; ++r) {
    absl::StatusOr<std::string> saved =
        (*trainer)->SaveCheckpoint("bench", /*background=*/true);
    if (!saved.ok()) return saved.status();
    const double blocking = (*trainer)->last_checkpoint_times().blocking_ms;
    const auto write_start = std::chrono::steady_clock::now();
    if (absl::Status s = (*trainer)->WaitForCheckpoint(); !s.ok()) return s;
    writes.push_back(MsSince(write_start));  // the rest of the write after the call returned
    if (r == 0) {
      result.first_blocking_ms = blocking;
      result.first_allocated_bytes = (*trainer)->last_checkpoint_times().allocated_bytes;
    } else {
      result.blocking_ms = std::min(result.blocking_ms, blocking);
    }
    const trainer::CheckpointTimes& times = (*trainer)->last_checkpoint_times();
    std::printf("    %s save %d%s: blocking %.2f ms (copy %.2f ms), allocated %lld bytes, write %.1f "
                "ms more\n",
                preset.c_str(), r, r == 0 ? " (first)" : "", blocking, times.copy_ms,
                static_cast<long long>(times.allocated_bytes), writes.back());
    std::fflush(stdout);
  }
  std::sort(writes.begin(), writes.end());
  result.write_ms = writes[writes.size() / 2];
  return result;
}

int Main(int argc, char** argv) {
  CLI::App app{"bench_checkpoint: background checkpoint blocking time vs memcpy of the state"};
  std::string presets_flag = "tiny,small,base", json_path, dir_flag;
  int repeats = 3;
  app.add_option("--presets", presets_flag, "Comma-separated model presets")
      ->capture_default_str();
  app.add_option("--repeats", repeats, "Warm saves and memcpy repeats per preset")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", json_path, "Write results as JSON here");
  app.add_option("--dir", dir_flag, "Where checkpoints are written (default: a temp directory)");
  CLI11_PARSE(app, argc, argv);
  const fs::path dir = dir_flag.empty()
                           ? fs::temp_directory_path() /
                                 ("bench_checkpoint_" + std::to_string(::getpid()))
                           : fs::path(dir_flag);

  std::printf("bench_checkpoint: %d threads, checkpoints under %s\n", torch::get_num_threads(),
              dir.c_str());
  std::vector<PresetResult> results;
  const std::vector<std::string> presets = absl::StrSplit(presets_flag, ',', absl::SkipEmpty());
  for (const std::string& preset : presets) {
    fs::remove_all(dir);
    absl::StatusOr<PresetResult> result = RunPreset(preset, dir, repeats);
    fs::remove_all(dir);
    if (!result.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", preset.c_str(), result.status().ToString().c_str());
      return 1;
    }
    results.push_back(*result);
  }
  std::printf("  %-8s %10s %11s %10s %10s %12s %14s %10s %9s %10s %9s\n", "preset", "params",
              "state MB", "memcpy ms", "cold ms", "blocking ms", "1st block ms", "write ms",
              "blk/mcpy", "1st/mcpy", "blk/cold");
  nlohmann::json json = {{"threads", torch::get_num_threads()},
                         {"presets", nlohmann::json::array()}};
  for (const PresetResult& r : results) {
    const double ratio = r.blocking_ms / std::max(1e-9, r.memcpy_ms);
    const double first_ratio = r.first_blocking_ms / std::max(1e-9, r.memcpy_ms);
    const double worst_vs_cold =
        std::max(r.blocking_ms, r.first_blocking_ms) / std::max(1e-9, r.cold_memcpy_ms);
    std::printf("  %-8s %9.1fM %11.1f %10.2f %10.2f %12.2f %14.2f %10.1f %9.2f %10.2f %9.2f\n",
                r.preset.c_str(), r.parameters / 1e6, r.state_bytes / 1e6, r.memcpy_ms,
                r.cold_memcpy_ms, r.blocking_ms, r.first_blocking_ms, r.write_ms, ratio,
                first_ratio, worst_vs_cold);
    json["presets"].push_back({{"preset", r.preset},
                               {"parameters", r.parameters},
                               {"state_bytes", r.state_bytes},
                               {"memcpy_ms", r.memcpy_ms},
                               {"cold_memcpy_ms", r.cold_memcpy_ms},
                               {"blocking_ms", r.blocking_ms},
                               {"first_blocking_ms", r.first_blocking_ms},
                               {"first_allocated_bytes", r.first_allocated_bytes},
                               {"write_ms", r.write_ms},
                               {"blocking_vs_memcpy", ratio},
                               {"first_blocking_vs_memcpy", first_ratio},
                               {"worst_blocking_vs_cold_memcpy", worst_vs_cold}});
  }
  std::printf(
      "  goal: blocking / memcpy <= 2 at every save, the first included (blk/cold: the larger "
      "of blocking and 1st block over a memcpy from memory)\n");
  if (!json_path.empty()) {
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
