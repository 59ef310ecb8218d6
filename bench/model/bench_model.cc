// bench_model: forward throughput of the shared model, with a BLAS reference measured in the same
// run so that figures from a noisy machine can be compared.
//   build/bench/bench_model [--preset base] [--json FILE] [--seconds 3] [--threads 0]
// Prints a table and writes JSON: forward_tokens_per_s (training path, batch x seq),
// decode_tokens_per_s (paged path, one token per sequence per step), blas_gflops (512x1024x1024
// LibTorch matmul). --decode-op-times also times the decode steps op by op (OpTimer) and prints
// each op's milliseconds a step and share of the step (JSON decode_op_ms_per_step).
// --kernel-team-rounds N then runs the decode N times more with the kernel team on and off in
// turn (kernel_team_ops.h: a decode forward as one OpenMP region) and prints both rates and
// their medians (JSON decode_tokens_per_s_team_{on,off}, medians, and _rounds lists).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "bench/median.h"
#include "bench/model/throughput.h"
#include "model/checkpoint.h"
#include "model/kernels/kernel_team_ops.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  using namespace lockstep;
  using namespace lockstep::bench;
  CLI::App app{"bench_model: shared-model forward and decode throughput"};
  std::string preset = "base", arch_name = "qwen3", json_path, mode_name = "fast";
  double seconds = 3.0;
  int threads = 0;
  int64_t batch_size = 8, seq_len = 256, decode_context = 128, decode_steps = 32;
  bool decode_op_times = false;
  int kernel_team_rounds = 0;
  app.add_option("--preset", preset)->capture_default_str();
  app.add_option("--arch", arch_name)->capture_default_str();
  app.add_option("--mode", mode_name, "Numeric mode: fast or batch_invariant")
      ->check(CLI::IsMember({"fast", "batch_invariant"}))
      ->capture_default_str();
  app.add_option("--json", json_path, "Write results as JSON here");
  app.add_option("--seconds", seconds, "Minimum timed seconds per figure")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads (0 = LibTorch default)");
  app.add_option("--batch", batch_size)->capture_default_str();
  app.add_option("--seq", seq_len)->capture_default_str();
  app.add_option("--decode-context", decode_context)->capture_default_str();
  app.add_option("--decode-steps", decode_steps)->capture_default_str();
  app.add_flag("--decode-op-times", decode_op_times,
               "Also time the decode steps op by op and print where a step goes");
  app.add_option("--kernel-team-rounds", kernel_team_rounds,
                 "Then time the decode this many times with the kernel team on and off in turn")
      ->check(CLI::Range(0, 100));
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) torch::set_num_threads(threads);

  absl::StatusOr<Architecture> arch = ParseArchitectureName(arch_name);
  absl::StatusOr<ModelConfig> config =
      arch.ok() ? PresetConfig(*arch, preset) : absl::StatusOr<ModelConfig>(arch.status());
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().ToString().c_str());
    return 1;
  }
  ModelOptions options;
  options.numeric_mode = *ParseNumericMode(mode_name);
  auto model = CreateRandomModel(*config, /*seed=*/0, options);
  std::printf("bench_model: %s %s (%.1fM params), %s mode, %d threads\n", arch_name.c_str(),
              preset.c_str(), config->NumParameters() / 1e6, mode_name.c_str(),
              torch::get_num_threads());
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

  // The kernel team on and off in turn, in this one process (the host's bandwidth moves by the
  // minute; rounds side by side are what compare).
  std::vector<double> team_rates[2];  // [off, on]
  for (int round = 0; round < kernel_team_rounds; ++round) {
    int64_t teams[2] = {0, 0};  // teams the decode started, [off, on]: shows the switch acted
    for (int turn : {0, 1}) {  // on first in even rounds, off first in odd ones
      const int on = (round + turn) % 2 == 0 ? 1 : 0;
      kernels::SetKernelTeamEnabled(on != 0);
      const int64_t started = kernels::KernelTeamsStarted();
      team_rates[on].push_back(
          DecodeTokensPerSecond(*model, batch_size, decode_context, decode_steps));
      teams[on] = kernels::KernelTeamsStarted() - started;
    }
    kernels::SetKernelTeamEnabled(true);
    std::printf("  decode with the kernel team on / off, round %d: %.1f / %.1f tokens/s "
                "(teams started %ld / %ld)\n",
                round + 1, team_rates[1].back(), team_rates[0].back(),
                static_cast<long>(teams[1]), static_cast<long>(teams[0]));
    std::fflush(stdout);
  }
  if (kernel_team_rounds > 0) {
    std::printf("  %-44s %12.1f / %.1f\n", "decode tokens/s, kernel team on / off (median)",
                Median(team_rates[1]), Median(team_rates[0]));
  }

  nlohmann::json op_ms = nlohmann::json::object();
  if (decode_op_times) {
    // A second decode run with the timer (the taps cost a clock read each, so its rate is not
    // the one above): per op, ms a step over every layer, largest first.
    OpTimer timer;
    const double timed = DecodeTokensPerSecond(*model, batch_size, decode_context, decode_steps,
                                               &timer);
    const double step_ms = timer.TotalSeconds() * 1e3 / decode_steps;
    std::printf("  decode op times (a second run, %.1f tokens/s): %.3f ms a step\n", timed,
                step_ms);
    // q, k and v are one kernel call, as are gate and up (model/layers.h, ForwardLinears).
    std::printf("  (q_proj includes k_proj and v_proj, gate_proj includes up_proj: one call each)\n");
    std::vector<Op> ops;
    for (int i = 0; i < kNumOps; ++i) {
      if (timer.Calls(static_cast<Op>(i)) > 0) ops.push_back(static_cast<Op>(i));
    }
    std::sort(ops.begin(), ops.end(),
              [&](Op a, Op b) { return timer.Seconds(a) > timer.Seconds(b); });
    for (Op op : ops) {
      const double ms = timer.Seconds(op) * 1e3 / decode_steps;
      op_ms[OpName(op)] = ms;
      std::printf("    %-20s %8.3f ms  %5.1f%%  (%ld calls a step)\n", OpName(op), ms,
                  100.0 * ms / step_ms, static_cast<long>(timer.Calls(op) / decode_steps));
    }
  }

  if (!json_path.empty()) {
    nlohmann::json json = {{"preset", preset},
                           {"arch", arch_name},
                           {"mode", mode_name},
                           {"parameters", config->NumParameters()},
                           {"threads", torch::get_num_threads()},
                           {"batch", batch_size},
                           {"seq", seq_len},
                           {"decode_context", decode_context},
                           {"decode_steps", decode_steps},
                           {"blas_gflops", blas},
                           {"forward_tokens_per_s", forward},
                           {"decode_tokens_per_s", decode}};
    if (decode_op_times) json["decode_op_ms_per_step"] = op_ms;
    if (kernel_team_rounds > 0) {
      json["decode_tokens_per_s_team_on"] = Median(team_rates[1]);
      json["decode_tokens_per_s_team_off"] = Median(team_rates[0]);
      json["decode_tokens_per_s_team_on_rounds"] = team_rates[1];
      json["decode_tokens_per_s_team_off_rounds"] = team_rates[0];
    }
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
