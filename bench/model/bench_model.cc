// bench_model: forward throughput of the shared model, with a BLAS reference measured in the same
// run so that figures from a noisy machine can be compared.
//   build/bench/bench_model [--preset base] [--json FILE] [--seconds 3] [--threads 0]
// Prints a table and writes JSON: forward_tokens_per_s (training path, batch x seq),
// decode_tokens_per_s (paged path, one token per sequence per step), blas_gflops (512x1024x1024
// LibTorch matmul).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "model/checkpoint.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `body` at least once and until `seconds` have passed; returns seconds per call (the
// fastest of the timed runs, after one warm-up call).
double TimePerCall(const std::function<void()>& body, double seconds) {
  body();  // warm-up
  double best = 1e30, total = 0;
  int runs = 0;
  while (total < seconds || runs < 2) {
    const auto start = Clock::now();
    body();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, elapsed);
    total += elapsed;
    ++runs;
  }
  return best;
}

double BlasGflops(double seconds) {
  torch::Tensor a = torch::randn({512, 1024});
  torch::Tensor b = torch::randn({1024, 1024});
  const double per_call = TimePerCall([&] { torch::matmul(a, b); }, seconds);
  return 2.0 * 512 * 1024 * 1024 / per_call / 1e9;
}

double ForwardTokensPerSecond(Transformer& model, int64_t batch_size, int64_t seq_len,
                              double seconds) {
  torch::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> sequences(batch_size);
  for (int64_t s = 0; s < batch_size; ++s) {
    for (int64_t t = 0; t < seq_len; ++t) {
      sequences[s].push_back((s * 7919 + t * 104729) % model.config().vocab_size);
    }
  }
  PackedBatch batch = *PackSequences(sequences);
  torch::Tensor targets = batch.token_ids.roll(-1);
  const double per_call = TimePerCall(
      [&] {
        torch::Tensor hidden = *model.Hidden(batch, TrainingAttention{});
        model.TargetLogProbs(hidden, targets);
      },
      seconds);
  return batch_size * seq_len / per_call;
}

// Decode steps at a context of `context` tokens: each step appends one token per sequence.
double DecodeTokensPerSecond(Transformer& model, int64_t batch_size, int64_t context,
                             int64_t steps) {
  torch::NoGradGuard no_grad;
  const int64_t block_size = 16;
  const int64_t blocks_per_sequence = (context + steps + block_size - 1) / block_size;
  PagedKvCache cache = AllocatePagedKvCache(model.config(), batch_size * blocks_per_sequence,
                                            block_size, model.options().compute_dtype);
  PagedAttention paged{&cache, {}};
  std::vector<std::vector<int64_t>> prompts(batch_size);
  for (int64_t s = 0; s < batch_size; ++s) {
    std::vector<int32_t> table;
    for (int64_t b = 0; b < blocks_per_sequence; ++b) table.push_back(s * blocks_per_sequence + b);
    paged.block_tables.push_back(table);
    for (int64_t t = 0; t < context; ++t) prompts[s].push_back((s + 3 * t) % 256);
  }
  std::vector<int64_t> starts(batch_size, 0);
  (void)*model.Hidden(*PackContinuations(prompts, starts), paged);  // prefill, not timed
  std::vector<std::vector<int64_t>> step_tokens(batch_size, std::vector<int64_t>{1});
  std::fill(starts.begin(), starts.end(), context);
  const auto start = Clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    PackedBatch batch = *PackContinuations(step_tokens, starts);
    torch::Tensor hidden = *model.Hidden(batch, paged);
    torch::Tensor next = model.Logits(Transformer::LastTokenRows(hidden, batch)).argmax(-1);
    for (int64_t s = 0; s < batch_size; ++s) {
      step_tokens[s][0] = next[s].item<int64_t>();
      ++starts[s];
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return batch_size * steps / elapsed;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  CLI::App app{"bench_model: shared-model forward and decode throughput"};
  std::string preset = "base", arch_name = "qwen3", json_path;
  double seconds = 3.0;
  int threads = 0;
  int64_t batch_size = 8, seq_len = 256, decode_context = 128, decode_steps = 32;
  app.add_option("--preset", preset)->capture_default_str();
  app.add_option("--arch", arch_name)->capture_default_str();
  app.add_option("--json", json_path, "Write results as JSON here");
  app.add_option("--seconds", seconds, "Minimum timed seconds per figure")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads (0 = LibTorch default)");
  app.add_option("--batch", batch_size)->capture_default_str();
  app.add_option("--seq", seq_len)->capture_default_str();
  app.add_option("--decode-context", decode_context)->capture_default_str();
  app.add_option("--decode-steps", decode_steps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) torch::set_num_threads(threads);

  absl::StatusOr<Architecture> arch = ParseArchitectureName(arch_name);
  absl::StatusOr<ModelConfig> config =
      arch.ok() ? PresetConfig(*arch, preset) : absl::StatusOr<ModelConfig>(arch.status());
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().ToString().c_str());
    return 1;
  }
  auto model = CreateRandomModel(*config, /*seed=*/0);
  std::printf("bench_model: %s %s (%.1fM params), %d threads\n", arch_name.c_str(),
              preset.c_str(), config->NumParameters() / 1e6, torch::get_num_threads());
  const double blas = BlasGflops(seconds);
  std::printf("  %-44s %12.1f\n", "blas_gflops (512x1024x1024 matmul)", blas);
  std::fflush(stdout);
  const double forward = ForwardTokensPerSecond(*model, batch_size, seq_len, seconds);
  std::printf("  %-44s %12.1f\n",
              ("forward_tokens_per_s (training, " + std::to_string(batch_size) + "x" +
               std::to_string(seq_len) + ")").c_str(), forward);
  std::fflush(stdout);
  const double decode = DecodeTokensPerSecond(*model, batch_size, decode_context, decode_steps);
  std::printf("  %-44s %12.1f\n",
              ("decode_tokens_per_s (paged, batch " + std::to_string(batch_size) + ", ctx " +
               std::to_string(decode_context) + ")").c_str(), decode);

  if (!json_path.empty()) {
    nlohmann::json json = {{"preset", preset},
                           {"arch", arch_name},
                           {"parameters", config->NumParameters()},
                           {"threads", torch::get_num_threads()},
                           {"batch", batch_size},
                           {"seq", seq_len},
                           {"decode_context", decode_context},
                           {"decode_steps", decode_steps},
                           {"blas_gflops", blas},
                           {"forward_tokens_per_s", forward},
                           {"decode_tokens_per_s", decode}};
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
