// bench_diagnose: what `lockstep diagnose` costs over the two plain forwards it replaces.
//   build/bench/bench_diagnose [--preset base] [--sequences 8] [--tokens 128] [--threads 0]
//       [--mode batch_invariant] [--json FILE]
// Path A = the trainer's forward, B = the generator's prefill + decode (the defaults of the
// tool). Times, in one run: each path once without an observer (plain), then Diagnose() with
// the capture and the comparison (its model load timed apart and left out of the ratio).
// JSON keys: plain_train_s, plain_generate_s, diagnose_s (without the load), load_s,
// diagnose_vs_plain (goal <= 3), capture_peak_mb (the two captures of one group),
// peak_rss_mb, identical.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "CLI/CLI.hpp"
#include "diagnose/diagnose.h"
#include "model/checkpoint.h"
#include "nlohmann/json.hpp"

namespace lockstep::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

int Run(int argc, char** argv) {
  std::string preset = "base", mode_name = "batch_invariant", json_path;
  int64_t num_sequences = 8, num_tokens = 128;
  int threads = 0;
  CLI::App app{"bench_diagnose: lockstep diagnose against the two plain forwards"};
  app.add_option("--preset", preset)->capture_default_str();
  app.add_option("--sequences", num_sequences)->capture_default_str();
  app.add_option("--tokens", num_tokens)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--mode", mode_name)->capture_default_str();
  app.add_option("--json", json_path);
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<NumericMode> mode = ParseNumericMode(mode_name);
  absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, preset);
  if (!mode.ok() || !config.ok()) {
    std::fprintf(stderr, "bench_diagnose: bad --mode or --preset\n");
    return 2;
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("bench_diagnose_" + std::to_string(getpid()));
  if (absl::Status s = SaveModel(*CreateRandomModel(*config, /*seed=*/1), dir); !s.ok()) {
    std::fprintf(stderr, "bench_diagnose: %s\n", s.ToString().c_str());
    return 1;
  }
  diagnose::DiagnoseRequest request;
  request.model_dir = dir;
  request.a.mode = *mode;
  request.a.threads = threads;
  request.b = diagnose::DefaultGeneratePath(*mode);
  request.b.threads = threads;
  for (int64_t s = 0; s < num_sequences; ++s) {
    diagnose::DiagnoseSequence sequence;
    for (int64_t t = 0; t < num_tokens; ++t) {
      sequence.tokens.push_back((s * 7919 + t * 104729 + 17) % config->vocab_size);
    }
    sequence.prompt_length = num_tokens / 2;
    request.sequences.push_back(std::move(sequence));
  }
  std::printf("bench_diagnose: %s preset, %lld sequences x %lld tokens, %s, threads %d\n",
              preset.c_str(), static_cast<long long>(num_sequences),
              static_cast<long long>(num_tokens), mode_name.c_str(), threads);

  auto start = std::chrono::steady_clock::now();
  ModelOptions options;
  options.numeric_mode = *mode;
  absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModel(dir, options);
  const double load_s = Seconds(start);
  if (!model.ok()) return 1;
  // The plain forwards, sequence by sequence as diagnose's default groups run them.
  double plain_train = 0, plain_generate = 0;
  for (const auto& sequence : request.sequences) {
    for (const auto& [settings, total] :
         {std::make_pair(request.a, &plain_train), std::make_pair(request.b, &plain_generate)}) {
      absl::StatusOr<diagnose::PathRun> run = diagnose::RunPath(
          **model, {sequence}, settings, 1.0, /*perturb=*/nullptr, /*observe=*/false);
      if (!run.ok()) {
        std::fprintf(stderr, "bench_diagnose: %s\n", run.status().ToString().c_str());
        return 1;
      }
      *total += run->seconds;
    }
  }
  model->reset();
  std::printf("  plain: train %.2f s, generate %.2f s (model load %.2f s)\n", plain_train,
              plain_generate, load_s);

  const double rss_before = PeakRssMb();
  start = std::chrono::steady_clock::now();
  absl::StatusOr<diagnose::DiagnoseReport> report = diagnose::Diagnose(request);
  const double diagnose_s = Seconds(start) - load_s;
  if (!report.ok()) {
    std::fprintf(stderr, "bench_diagnose: %s\n", report.status().ToString().c_str());
    return 1;
  }
  const double ratio = diagnose_s / (plain_train + plain_generate);
  const double capture_mb = report->capture_bytes_peak / 1048576.0;
  std::printf("  diagnose: %.2f s (paths %.2f + %.2f s, the rest capture comparison) = %.2fx "
              "the plain forwards (goal <= 3); captures of one group %.1f MiB; peak RSS %.1f MiB "
              "(%.1f before); identical %s\n",
              diagnose_s, report->seconds_a, report->seconds_b, ratio, capture_mb, PeakRssMb(),
              rss_before, report->identical ? "yes" : "no");
  std::filesystem::remove_all(dir);
  if (!json_path.empty()) {
    nlohmann::json out = {{"preset", preset},
                          {"sequences", num_sequences},
                          {"tokens", num_tokens},
                          {"mode", mode_name},
                          {"threads", threads},
                          {"plain_train_s", plain_train},
                          {"plain_generate_s", plain_generate},
                          {"load_s", load_s},
                          {"diagnose_s", diagnose_s},
                          {"diagnose_paths_s", report->seconds_a + report->seconds_b},
                          {"diagnose_vs_plain", ratio},
                          {"capture_peak_mb", capture_mb},
                          {"peak_rss_mb", PeakRssMb()},
                          {"identical", report->identical}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Run(argc, argv); }
