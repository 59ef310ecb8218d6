// bench_trainer: training throughput of the trainer library (forward + backward + AdamW per
// step) in batch-invariant and fast modes, with the LibTorch GEMM rate measured in the same run.
//   build/bench/bench_trainer [--preset base] [--arch qwen3|llama|qwen3_moe] [--json FILE]
//       [--steps 3] [--warmup 1]
//       [--micro-batch-tokens 4096] [--seq 512] [--threads 0] [--modes both]
// Each step is one packed micro-batch of --micro-batch-tokens tokens (sequences of --seq tokens,
// a quarter prompt, the rest completion). The two modes' trainers exist side by side and step in
// turn, the order swapped every round, so that drift in the machine's speed reaches both.
// Achieved GFLOP/s = 6 x parameters x tokens / time, counting a Qwen3-MoE's active parameters
// (each token's k experts, the whole router).
// JSON keys: tokens_per_s_fast, tokens_per_s_batch_invariant, gflops_*, blas_gflops, bi_vs_fast
// (batch-invariant / fast tokens per second, of each mode's fastest timed step),
// bi_vs_fast_rounds (the same ratio of each round's two timed steps) and bi_vs_fast_median
// (their median, bench/median.h), mfu_vs_blas (fast-mode GFLOP/s / BLAS GFLOP/s)
// and mfu_vs_blas_batch_invariant, omp_wait_policy (it runs with the trainer service's policy,
// common/openmp_wait.h, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/median.h"
#include "bench/model/throughput.h"
#include "bench/simd_flag.h"
#include "common/openmp_wait.h"
#include "model/checkpoint.h"
#include "model/compute_threads.h"
#include "nlohmann/json.hpp"
#include "trainer/trainer.h"

namespace lockstep::bench {
namespace {

// The parameters one token's forward multiplies by: all of a dense model's; in a Qwen3-MoE's
// sparse layers the router and only num_experts_per_tok experts.
int64_t ActiveParameters(const ModelConfig& config) {
  ModelConfig active = config;
  active.num_experts = std::min(config.num_experts, config.num_experts_per_tok);
  const int64_t unused_router_rows = static_cast<int64_t>(config.SparseLayers().size()) *
                                     (config.num_experts - active.num_experts);
  return active.NumParameters() + unused_router_rows * config.hidden_size;
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

int64_t MinorPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

struct ModeResult {
  double seconds_per_step = 0;  // fastest timed step
  double cpu_seconds_per_step = 0;  // process CPU time of the fastest-CPU timed step
  int64_t page_faults_per_step = 0;  // minor page faults of that step (fresh memory)
  double tokens_per_s = 0;
  double gflops = 0;
  double loss = 0;
};

// `num_sequences` rollouts of `seq_len` tokens sampled (by version) under `version`.
std::vector<trainer::Rollout> MakeBatch(int64_t num_sequences, int64_t seq_len, int64_t vocab,
                                        int64_t version, int64_t salt) {
  std::vector<trainer::Rollout> batch;
  const int64_t prompt_length = seq_len / 4;
  for (int64_t s = 0; s < num_sequences; ++s) {
    trainer::Rollout rollout;
    for (int64_t t = 0; t < seq_len; ++t) {
      const int64_t token = (salt * 31337 + s * 7919 + t * 104729) % vocab;
      if (t < prompt_length) {
        rollout.prompt_tokens.push_back(token);
      } else {
        rollout.completion_tokens.push_back(token);
        rollout.behaviour_logprobs.push_back(-10.0f);
        rollout.weight_versions.push_back(version);
      }
    }
    rollout.advantage = s % 2 == 0 ? 1.0 : -1.0;
    rollout.group_id = s / 2;
    batch.push_back(std::move(rollout));
  }
  return batch;
}

// One mode's trainer and its step times so far.
class ModeRun {
 public:
  static absl::StatusOr<std::unique_ptr<ModeRun>> Create(const ModelConfig& config,
                                                         NumericMode mode,
                                                         int64_t micro_batch_tokens,
                                                         int64_t seq_len) {
    ModelOptions model_options;
    model_options.numeric_mode = mode;
    trainer::TrainerOptions options;
    options.mode = mode;
    options.lr = 1e-5;
    options.micro_batch_tokens = micro_batch_tokens;
    absl::StatusOr<std::unique_ptr<trainer::Trainer>> trainer =
        trainer::Trainer::Create(CreateRandomModel(config, /*seed=*/0, model_options), options);
    if (!trainer.ok()) return trainer.status();
    return std::unique_ptr<ModeRun>(
        new ModeRun(config, mode, micro_batch_tokens / seq_len, seq_len, std::move(*trainer)));
  }

  // Step `i` (its batch depends on i); a warm-up step is printed but not counted.
  absl::StatusOr<double> Step(int i, bool warmup) {
    std::vector<trainer::Rollout> batch = MakeBatch(num_sequences_, seq_len_, config_.vocab_size,
                                                    trainer_->weight_version(), i);
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ProcessCpuSeconds();
    const int64_t faults_start = MinorPageFaults();
    absl::StatusOr<trainer::StepMetrics> metrics = trainer_->TrainStep(batch);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
    const int64_t faults = MinorPageFaults() - faults_start;
    if (!metrics.ok()) return metrics.status();
    if (metrics->micro_batches != 1) {
      return absl::InternalError("the batch was not packed into one micro-batch");
    }
    std::printf("    %s step %d%s: %.2f s (CPU %.2f s, %lld page faults), loss %.4f\n",
                NumericModeName(mode_), i, warmup ? " (warm-up)" : "", seconds, cpu_seconds,
                static_cast<long long>(faults), metrics->loss);
    std::fflush(stdout);
    if (!warmup && seconds < result_.seconds_per_step) result_.seconds_per_step = seconds;
    if (!warmup && cpu_seconds < result_.cpu_seconds_per_step) {
      result_.cpu_seconds_per_step = cpu_seconds;
      result_.page_faults_per_step = faults;
    }
    result_.loss = metrics->loss;
    return seconds;
  }

  // The fastest timed step's figures.
  ModeResult Result() const {
    ModeResult result = result_;
    const int64_t tokens = num_sequences_ * seq_len_;
    result.tokens_per_s = tokens / result.seconds_per_step;
    result.gflops = 6.0 * ActiveParameters(config_) * tokens / result.seconds_per_step / 1e9;
    return result;
  }

 private:
  ModeRun(const ModelConfig& config, NumericMode mode, int64_t num_sequences, int64_t seq_len,
          std::unique_ptr<trainer::Trainer> trainer)
      : config_(config),
        mode_(mode),
        num_sequences_(num_sequences),
        seq_len_(seq_len),
        trainer_(std::move(trainer)) {
    result_.seconds_per_step = 1e30;
    result_.cpu_seconds_per_step = 1e30;
  }

  const ModelConfig config_;
  const NumericMode mode_;
  const int64_t num_sequences_, seq_len_;
  std::unique_ptr<trainer::Trainer> trainer_;
  ModeResult result_;
};

std::string Format3(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", value);
  return text;
}

int Main(int argc, char** argv) {
  CLI::App app{"bench_trainer: training tokens/s (forward + backward + AdamW), both modes"};
  std::string preset = "base", arch_name = "qwen3", json_path, modes_flag = "both";
  int threads = 0, steps = 3, warmup = 1;
  int64_t micro_batch_tokens = 4096, seq_len = 512;
  double blas_seconds = 2.0;
  app.add_option("--preset", preset)->capture_default_str();
  app.add_option("--arch", arch_name)
      ->check(CLI::IsMember({"qwen3", "llama", "qwen3_moe"}))
      ->capture_default_str();
  app.add_option("--json", json_path, "Write results as JSON here");
  app.add_option("--steps", steps, "Timed steps per mode, the modes in turn (the fastest counts)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps per mode first")->capture_default_str();
  app.add_option("--micro-batch-tokens", micro_batch_tokens)->capture_default_str();
  app.add_option("--seq", seq_len, "Tokens per sequence")->capture_default_str();
  app.add_option("--threads", threads,
                 "Threads of LibTorch and OpenBLAS (0 = the physical cores)");
  app.add_option("--blas-seconds", blas_seconds)->capture_default_str();
  app.add_option("--modes", modes_flag, "both, fast or batch_invariant (one mode: for profiling)")
      ->check(CLI::IsMember({"both", "fast", "batch_invariant"}))
      ->capture_default_str();
  std::string simd = "auto";
  AddSimdOption(app, &simd);
  CLI11_PARSE(app, argc, argv);
  if (!ApplySimdLevel(simd)) return 2;
  // Run as the orchestrator runs the trainer service: with TrainingOpenMpEnvironment() (libgomp
  // reads it only when it loads, hence an exec of this same program; set OMP_WAIT_POLICY or
  // GOMP_SPINCOUNT to time another policy). Should the exec fail, the output names the policy.
  if (const auto env = TrainingOpenMpEnvironment(); !env.empty()) {
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), /*overwrite=*/1);
    execv("/proc/self/exe", argv);
  }
  SetComputeThreads(threads);  // both pools: fast mode's sgemm and our kernels on the same count
  if (seq_len <= 0 || micro_batch_tokens < seq_len) {
    std::fprintf(stderr, "error: need 0 < --seq <= --micro-batch-tokens\n");
    return 1;
  }

  absl::StatusOr<ModelConfig> config = PresetConfig(*ParseArchitectureName(arch_name), preset);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().ToString().c_str());
    return 1;
  }
  const int64_t tokens = micro_batch_tokens / seq_len * seq_len;
  std::printf(
      "bench_trainer: %s %s (%.1fM params, %.1fM active), %lld tokens per step (%lld x %lld), "
      "%d threads\n",
      arch_name.c_str(), preset.c_str(), config->NumParameters() / 1e6,
      ActiveParameters(*config) / 1e6, static_cast<long long>(tokens),
      static_cast<long long>(micro_batch_tokens / seq_len), static_cast<long long>(seq_len),
      torch::get_num_threads());
  const std::string cpu = CpuModelName(), stock_blas = StockBlasName();
  const std::string omp_wait = OpenMpWaitPolicy();
  const char* simd_level = SimdLevelName(kernels::ActiveSimdLevel());
  std::printf("  CPU: %s | stock BLAS: %s | OpenMP wait: %s | our kernels: %s\n", cpu.c_str(),
              stock_blas.c_str(), omp_wait.c_str(), simd_level);
  const double blas = BlasGflops(blas_seconds);
  std::printf("  %-40s %12.1f\n", "blas_gflops (512x1024x1024 matmul)", blas);
  std::fflush(stdout);

  // Both modes' trainers live side by side and take their steps in turn, the order swapped every
  // round (BI then fast, fast then BI, ...): a machine whose speed drifts over minutes, as a
  // shared VM's does, slows both modes alike instead of whichever ran second.
  const NumericMode modes[2] = {NumericMode::kBatchInvariant, NumericMode::kFast};
  std::unique_ptr<ModeRun> runs[2];
  for (int m = 0; m < 2; ++m) {
    if (modes_flag != "both" && modes_flag != NumericModeName(modes[m])) continue;
    absl::StatusOr<std::unique_ptr<ModeRun>> run =
        ModeRun::Create(*config, modes[m], micro_batch_tokens, seq_len);
    if (!run.ok()) {
      std::fprintf(stderr, "error: %s\n", run.status().ToString().c_str());
      return 1;
    }
    runs[m] = std::move(*run);
  }
  std::vector<double> round_ratios;  // BI / fast tokens per second, round by round
  for (int i = 0; i < warmup + steps; ++i) {
    double seconds[2] = {0, 0};
    for (int turn = 0; turn < 2; ++turn) {
      const int m = i % 2 == 0 ? turn : 1 - turn;
      if (runs[m] == nullptr) continue;
      absl::StatusOr<double> step = runs[m]->Step(i, /*warmup=*/i < warmup);
      if (!step.ok()) {
        std::fprintf(stderr, "error: %s\n", step.status().ToString().c_str());
        return 1;
      }
      seconds[m] = *step;
    }
    if (i >= warmup && runs[0] != nullptr && runs[1] != nullptr) {
      round_ratios.push_back(seconds[1] / seconds[0]);
    }
  }
  const ModeResult bi = runs[0] != nullptr ? runs[0]->Result() : ModeResult();
  const ModeResult fast = runs[1] != nullptr ? runs[1]->Result() : ModeResult();
  const double bi_vs_fast = bi.tokens_per_s / fast.tokens_per_s;
  const double bi_vs_fast_median = round_ratios.empty() ? 0.0 : Median(round_ratios);
  const double mfu_fast = fast.gflops / blas;
  const double mfu_bi = bi.gflops / blas;
  std::printf("  %-40s %12s %12s\n", "", "batch_inv", "fast");
  std::printf("  %-40s %12.3f %12.3f\n", "seconds per step", bi.seconds_per_step,
              fast.seconds_per_step);
  std::printf("  %-40s %12.3f %12.3f\n", "CPU seconds per step (all threads)",
              bi.cpu_seconds_per_step, fast.cpu_seconds_per_step);
  std::printf("  %-40s %12lld %12lld\n", "page faults per step",
              static_cast<long long>(bi.page_faults_per_step),
              static_cast<long long>(fast.page_faults_per_step));
  std::printf("  %-40s %12.1f %12.1f\n", "training tokens/s", bi.tokens_per_s, fast.tokens_per_s);
  std::printf("  %-40s %12.1f %12.1f\n", "achieved GFLOP/s (6 N T / t)", bi.gflops, fast.gflops);
  std::printf("  %-40s %12.3f %12.3f\n", "vs BLAS GFLOP/s", mfu_bi, mfu_fast);
  std::printf("  %-40s %12.3f\n", "bi_vs_fast (goal >= 0.9, issue 25)", bi_vs_fast);
  std::string rounds;
  for (const double ratio : round_ratios) rounds += (rounds.empty() ? "" : ", ") + Format3(ratio);
  std::printf("  %-40s %12.3f  (rounds: %s)\n", "bi_vs_fast_median (round by round)",
              bi_vs_fast_median, rounds.c_str());
  std::printf("  %-40s %12.3f\n", "mfu_vs_blas, fast (target >= 0.4)", mfu_fast);

  if (!json_path.empty()) {
    nlohmann::json json = {{"preset", preset},
                           {"arch", arch_name},
                           {"cpu_model", cpu},
                           {"simd_level", simd_level},
                           {"stock_blas", stock_blas},
                           {"omp_wait_policy", omp_wait},
                           {"parameters", config->NumParameters()},
                           {"active_parameters", ActiveParameters(*config)},
                           {"threads", torch::get_num_threads()},
                           {"tokens_per_step", tokens},
                           {"seq", seq_len},
                           {"micro_batch_tokens", micro_batch_tokens},
                           {"steps", steps},
                           {"warmup", warmup},
                           {"blas_gflops", blas},
                           {"seconds_per_step_fast", fast.seconds_per_step},
                           {"seconds_per_step_batch_invariant", bi.seconds_per_step},
                           {"cpu_seconds_per_step_fast", fast.cpu_seconds_per_step},
                           {"cpu_seconds_per_step_batch_invariant", bi.cpu_seconds_per_step},
                           {"page_faults_per_step_fast", fast.page_faults_per_step},
                           {"page_faults_per_step_batch_invariant", bi.page_faults_per_step},
                           {"tokens_per_s_fast", fast.tokens_per_s},
                           {"tokens_per_s_batch_invariant", bi.tokens_per_s},
                           {"gflops_fast", fast.gflops},
                           {"gflops_batch_invariant", bi.gflops},
                           {"bi_vs_fast", bi_vs_fast},
                           {"bi_vs_fast_median", bi_vs_fast_median},
                           {"bi_vs_fast_rounds", round_ratios},
                           {"mfu_vs_blas", mfu_fast},
                           {"mfu_vs_blas_batch_invariant", mfu_bi}};
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
