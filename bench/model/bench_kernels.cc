// bench_kernels: batch-invariant kernels against stock LibTorch, side by side in one run.
//   build/bench/bench_kernels [--json FILE] [--seconds 1] [--threads 0] [--skip-model]
// Linear GFLOP/s at M in {1, 8, 64, 512} with K = N = 1024 and at the base preset's shapes,
// attention decode, the row ops, forward + backward of attention and the row ops at one training
// sequence's shapes (formula through autograd against the kernels' own backward), and whole-model
// forward and decode tokens/s in both numeric modes.
// Ratios are batch-invariant / stock (higher is better, 1.0 = parity of speed).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/model/throughput.h"
#include "bench/simd_flag.h"
#include "model/checkpoint.h"
#include "model/compute_threads.h"
#include "model/kernels/linear_cpu.h"
#include "model/kernels/linear_ops.h"
#include "model/kernels/attention_ops.h"
#include "model/kernels/elementwise_ops.h"
#include "model/ops.h"
#include "model/rope.h"
#include "nlohmann/json.hpp"

namespace lockstep::bench {
namespace {

struct LinearFigures {
  double stock_gflops, invariant_gflops;
  double ratio() const { return invariant_gflops / stock_gflops; }
};

LinearFigures MeasureLinear(int64_t m, int64_t k, int64_t n, double seconds) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({m, k});
  torch::Tensor w = torch::randn({n, k}) / std::sqrt(static_cast<double>(k));
  const double flops = 2.0 * m * k * n;
  const double stock = TimePerCall([&] { torch::nn::functional::linear(x, w); }, seconds);
  const double invariant =
      TimePerCall([&] { kernels::FixedOrderLinear(x, w, {}); }, seconds);
  return {flops / stock / 1e9, flops / invariant / 1e9};
}

// One decode step's attention for `batch` sequences at `context` keys in a block cache.
std::pair<double, double> MeasureAttentionDecode(int64_t batch, int64_t context, int64_t heads,
                                                 int64_t kv_heads, int64_t head_dim,
                                                 double seconds) {
  torch::NoGradGuard no_grad;
  torch::Tensor cache_keys = torch::randn({batch * context, kv_heads, head_dim});
  torch::Tensor cache_values = torch::randn({batch * context, kv_heads, head_dim});
  torch::Tensor q = torch::randn({batch, heads, head_dim});
  std::vector<torch::Tensor> rows;
  for (int64_t s = 0; s < batch; ++s) {
    rows.push_back(torch::randperm(batch * context, torch::kInt64).narrow(0, 0, context));
  }
  auto run = [&](NumericMode mode) {
    for (int64_t s = 0; s < batch; ++s) {
      ops::AttentionOverRows(q.narrow(0, s, 1), cache_keys, cache_values, rows[s], context - 1,
                             mode);
    }
  };
  const double fast = TimePerCall([&] { run(NumericMode::kFast); }, seconds);
  const double invariant = TimePerCall([&] { run(NumericMode::kBatchInvariant); }, seconds);
  return {fast, invariant};
}

// Forward + backward (seconds per call) through the stock formula with autograd and through the
// kernel with its own backward, the gradients reset before each call.
struct TrainingOpFigures {
  double formula = 0, kernel = 0;
};

template <typename Formula, typename Kernel>
TrainingOpFigures TimeForwardBackward(std::vector<torch::Tensor> inputs,
                                      const torch::Tensor& grad_out, const Formula& formula,
                                      const Kernel& kernel, double seconds) {
  for (torch::Tensor& t : inputs) t.requires_grad_(true);
  auto run = [&](const auto& op) {
    for (torch::Tensor& t : inputs) t.mutable_grad().reset();
    op(inputs).backward(grad_out);
  };
  return {TimePerCall([&] { run(formula); }, seconds),
          TimePerCall([&] { run(kernel); }, seconds)};
}

// One training sequence's causal attention (queries x heads / kv heads x head_dim).
TrainingOpFigures MeasureAttentionTraining(int64_t queries, int64_t heads, int64_t kv_heads,
                                           int64_t head_dim, double seconds) {
  const torch::Tensor rows = torch::arange(queries, torch::kInt64);
  return TimeForwardBackward(
      {torch::randn({queries, heads, head_dim}), torch::randn({queries, kv_heads, head_dim}),
       torch::randn({queries, kv_heads, head_dim})},
      torch::randn({queries, heads, head_dim}),
      [](const std::vector<torch::Tensor>& in) { return ops::CausalAttention(in[0], in[1], in[2]); },
      [&](const std::vector<torch::Tensor>& in) {
        return kernels::FixedOrderAttention(in[0], in[1], in[2], rows, 0);
      },
      seconds);
}

TrainingOpFigures MeasureRmsNormTraining(int64_t rows, int64_t dim, double seconds) {
  return TimeForwardBackward(
      {torch::randn({rows, dim}), torch::rand({dim}) + 0.5}, torch::randn({rows, dim}),
      [](const std::vector<torch::Tensor>& in) { return ops::RmsNormFormula(in[0], in[1], 1e-6); },
      [](const std::vector<torch::Tensor>& in) {
        return kernels::FixedOrderRmsNorm(in[0], in[1], 1e-6);
      },
      seconds);
}

TrainingOpFigures MeasureSiluMulTraining(int64_t rows, int64_t dim, double seconds) {
  return TimeForwardBackward(
      {torch::randn({rows, dim}), torch::randn({rows, dim})}, torch::randn({rows, dim}),
      [](const std::vector<torch::Tensor>& in) { return ops::SiluMulFormula(in[0], in[1]); },
      [](const std::vector<torch::Tensor>& in) { return kernels::FixedOrderSiluMul(in[0], in[1]); },
      seconds);
}

// Stock-formula vs kernel time (seconds per call) of the row ops at one size, no grad.
struct RowOpFigures {
  double formula = 0, kernel = 0;
};

RowOpFigures MeasureRmsNorm(int64_t rows, int64_t dim, double seconds) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({rows, dim}), w = torch::randn({dim});
  return {TimePerCall([&] { ops::RmsNormFormula(x, w, 1e-6); }, seconds),
          TimePerCall([&] { kernels::FixedOrderRmsNorm(x, w, 1e-6); }, seconds)};
}

RowOpFigures MeasureSiluMul(int64_t rows, int64_t dim, double seconds) {
  torch::NoGradGuard no_grad;
  const torch::Tensor gate = torch::randn({rows, dim}), up = torch::randn({rows, dim});
  return {TimePerCall([&] { ops::SiluMulFormula(gate, up); }, seconds),
          TimePerCall([&] { kernels::FixedOrderSiluMul(gate, up); }, seconds)};
}

// RoPE of q ([tokens, 12, 64], base preset): the formula (grad path) vs the fused kernel.
RowOpFigures MeasureRope(int64_t tokens, double seconds) {
  absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, "base");
  const RopeTable rope(*config);
  const torch::Tensor x = torch::randn({tokens, 12, 64}).requires_grad_();
  const torch::Tensor positions = torch::arange(tokens, torch::kInt64);
  const double formula = TimePerCall([&] { rope.Apply(x, positions); }, seconds);
  torch::NoGradGuard no_grad;
  return {formula, TimePerCall([&] { rope.Apply(x, positions); }, seconds)};
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep;
  using namespace lockstep::bench;
  CLI::App app{"bench_kernels: batch-invariant kernels vs stock LibTorch"};
  std::string json_path;
  double seconds = 1.0;
  int threads = 0;
  bool skip_model = false;
  app.add_option("--json", json_path, "Write results as JSON here");
  app.add_option("--seconds", seconds, "Minimum timed seconds per figure")->capture_default_str();
  app.add_option("--threads", threads,
                 "Threads of LibTorch and OpenBLAS (0 = the physical cores)");
  app.add_flag("--skip-model", skip_model, "Skip the whole-model figures");
  std::string simd = "auto";
  AddSimdOption(app, &simd);
  CLI11_PARSE(app, argc, argv);
  if (!ApplySimdLevel(simd)) return 2;
  // LibTorch's pool and OpenBLAS's own (which torch::set_num_threads leaves at one thread per
  // core): stock and fixed-order figures at the same thread count. Before, "1 thread" timed
  // stock sgemm on every core against the kernel on one.
  SetComputeThreads(threads);
  const std::string cpu = CpuModelName();
  const std::string linear_variant = kernels::LinearKernelDescription();
  const std::string blas = StockBlasName();
  std::printf("bench_kernels: %s, %d threads\n  fixed-order linear: %s\n  stock BLAS: %s\n",
              cpu.c_str(), torch::get_num_threads(), linear_variant.c_str(), blas.c_str());
  nlohmann::json json = {{"cpu_model", cpu},
                         {"stock_blas", blas},
                         {"threads", torch::get_num_threads()},
                         {"simd_level", SimdLevelName(kernels::ActiveSimdLevel())},
                         {"linear_kernel", kernels::LinearKernelName()},
                         {"linear_kernel_variant", linear_variant}};

  std::printf("  %-34s %12s %12s %8s\n", "linear (M x K x N)", "stock GF/s", "invar GF/s",
              "ratio");
  auto report_linear = [&](int64_t m, int64_t k, int64_t n, const std::string& key) {
    LinearFigures f = MeasureLinear(m, k, n, seconds);
    const std::string label = std::to_string(m) + " x " + std::to_string(k) + " x " +
                              std::to_string(n);
    std::printf("  %-34s %12.1f %12.1f %8.3f\n", label.c_str(), f.stock_gflops,
                f.invariant_gflops, f.ratio());
    std::fflush(stdout);
    json[key] = f.ratio();
    json["linear"][label] = {{"stock_gflops", f.stock_gflops},
                             {"invariant_gflops", f.invariant_gflops}};
  };
  for (int64_t m : {1, 8, 64, 512}) {
    report_linear(m, 1024, 1024, "linear_ratio_m" + std::to_string(m));
  }
  // Base preset shapes: q/o, k/v, gate/up, down, LM head; decode (M=8) and prefill (M=512) rows.
  const std::pair<int64_t, int64_t> base_shapes[] = {
      {768, 768}, {768, 256}, {768, 2048}, {2048, 768}, {768, 32000}};
  for (int64_t m : {8, 512}) {
    for (const auto& [k, n] : base_shapes) {
      report_linear(m, k, n,
                    "linear_ratio_base_m" + std::to_string(m) + "_" + std::to_string(k) + "x" +
                        std::to_string(n));
    }
  }

  const auto [attention_fast, attention_invariant] =
      MeasureAttentionDecode(8, 512, 12, 4, 64, seconds);
  std::printf("  %-34s %12.3f %12.3f %8.3f\n", "attention decode 8 x ctx 512 (ms)",
              attention_fast * 1e3, attention_invariant * 1e3,
              attention_fast / attention_invariant);
  json["attention_decode_ms_fast"] = attention_fast * 1e3;
  json["attention_decode_ms_invariant"] = attention_invariant * 1e3;
  json["attention_decode_ratio"] = attention_fast / attention_invariant;

  std::printf("  %-34s %12s %12s %8s\n", "row ops (us per call)", "formula", "kernel",
              "speed-up");
  auto report_row_op = [&](const std::string& label, const std::string& key, RowOpFigures f) {
    std::printf("  %-34s %12.1f %12.1f %8.2f\n", label.c_str(), f.formula * 1e6, f.kernel * 1e6,
                f.formula / f.kernel);
    std::fflush(stdout);
    json[key] = {{"formula_us", f.formula * 1e6}, {"kernel_us", f.kernel * 1e6}};
  };
  for (int64_t rows : {8, 256}) {
    const std::string r = std::to_string(rows);
    report_row_op("rms_norm " + r + " x 768", "rms_norm_" + r + "x768",
                  MeasureRmsNorm(rows, 768, seconds));
    report_row_op("rms_norm " + r + " x 12 x 64 (q_norm)", "rms_norm_" + r + "x12x64",
                  MeasureRmsNorm(rows * 12, 64, seconds));
    report_row_op("silu_mul " + r + " x 2048", "silu_mul_" + r + "x2048",
                  MeasureSiluMul(rows, 2048, seconds));
    report_row_op("rope " + r + " x 12 x 64", "rope_" + r + "x12x64", MeasureRope(rows, seconds));
  }

  // One 512-token training sequence of the base preset, forward + backward.
  std::printf("  %-34s %12s %12s %8s\n", "training ops, fwd + bwd (ms)", "formula", "kernel",
              "speed-up");
  auto report_training_op = [&](const std::string& label, const std::string& key,
                                TrainingOpFigures f) {
    std::printf("  %-34s %12.3f %12.3f %8.2f\n", label.c_str(), f.formula * 1e3, f.kernel * 1e3,
                f.formula / f.kernel);
    std::fflush(stdout);
    json[key] = {{"formula_ms", f.formula * 1e3}, {"kernel_ms", f.kernel * 1e3}};
  };
  report_training_op("attention 512 x 12/4 x 64", "training_attention_512",
                     MeasureAttentionTraining(512, 12, 4, 64, seconds));
  report_training_op("rms_norm 512 x 768", "training_rms_norm_512x768",
                     MeasureRmsNormTraining(512, 768, seconds));
  report_training_op("rms_norm 512 x 12 x 64 (q_norm)", "training_rms_norm_512x12x64",
                     MeasureRmsNormTraining(512 * 12, 64, seconds));
  report_training_op("silu_mul 512 x 2048", "training_silu_mul_512x2048",
                     MeasureSiluMulTraining(512, 2048, seconds));

  if (!skip_model) {
    absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, "base");
    std::printf("  %-34s %12s %12s %8s\n", "base model (tokens/s)", "fast", "invariant",
                "ratio");
    double figures[2][2];
    for (int i = 0; i < 2; ++i) {
      ModelOptions options;
      options.numeric_mode = i == 0 ? NumericMode::kFast : NumericMode::kBatchInvariant;
      auto model = CreateRandomModel(*config, /*seed=*/0, options);
      figures[i][0] = ForwardTokensPerSecond(*model, 8, 256, seconds);
      figures[i][1] = DecodeTokensPerSecond(*model, 8, 128, 32);
    }
    std::printf("  %-34s %12.1f %12.1f %8.3f\n", "forward 8 x 256 (training path)",
                figures[0][0], figures[1][0], figures[1][0] / figures[0][0]);
    std::printf("  %-34s %12.1f %12.1f %8.3f\n", "decode batch 8, ctx 128 (paged)",
                figures[0][1], figures[1][1], figures[1][1] / figures[0][1]);
    json["forward_tokens_per_s_fast"] = figures[0][0];
    json["forward_tokens_per_s_invariant"] = figures[1][0];
    json["decode_tokens_per_s_fast"] = figures[0][1];
    json["decode_tokens_per_s_invariant"] = figures[1][1];
    json["forward_ratio"] = figures[1][0] / figures[0][0];
    json["decode_ratio"] = figures[1][1] / figures[0][1];
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
