// bench_generator: decode throughput of the generator Engine (continuous batching, paged KV
// cache) in both numeric modes, next to a Python reference loop on the same weights.
//   build/bench/bench_generator [--preset base] [--arch qwen3|qwen3_moe] [--json FILE]
//                               [--batches 1,8,32] [--prompt-len 32] [--max-tokens 64]
//                               [--threads 0] [--repeats 3]
//
// One run does everything: it writes a random model (CreateRandomModel + SaveModel) into a
// temporary directory, then runs each measurement in a fresh child process so that each one's
// peak RSS is its own: this program once per numeric mode (--worker MODE: the saved model loaded
// with LoadModel as the generator service loads it, an Engine, every batch size) and
// reference_generate.py (python3, torch CPU, same thread count, the weights read from the saved
// model.safetensors) at the ratio batch. Prints a table and writes JSON (keys in bench/README.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/generator/engine_workload.h"
#include "bench/generator/process_util.h"
#include "bench/kernels/stream_read.h"
#include "bench/simd_flag.h"
#include "generator/block_manager.h"
#include "generator/engine.h"
#include "model/checkpoint.h"
#include "model/compute_threads.h"
#include "model/kernels/linear_ops.h"
#include "nlohmann/json.hpp"

namespace lockstep::bench {
namespace {

constexpr double kMib = 1024.0 * 1024.0;
constexpr double kBiVsFastTarget = 0.85, kVsPythonTarget = 3.0, kPeakRssFactor = 1.25;

struct Flags {
  std::string preset = "base", arch = "qwen3", json_path, python = "/usr/bin/python3";
  std::string script = LOCKSTEP_REFERENCE_GENERATE_SCRIPT;
  std::vector<int64_t> batches = {1, 8, 32};
  int64_t ratio_batch = 8, prompt_len = 32, max_tokens = 64, block_size = 16;
  uint64_t model_seed = 0;
  int threads = 0;
  int repeats = 3;  // workload runs per mode and batch, each between two floor reads
  std::string simd = "auto";  // --simd (bench/simd_flag.h), passed on to the workers
  // Worker mode (internal): run one numeric mode on the model in worker_model_dir and write its
  // JSON to worker_out.
  std::string worker_mode, worker_out, worker_model_dir;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "bench_generator: %s\n", status.ToString().c_str());
  return 1;
}

absl::StatusOr<nlohmann::json> ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return absl::InternalError(absl::StrCat(path.string(), ": cannot open"));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InternalError(absl::StrCat(path.string(), ": not JSON"));
  return json;
}

std::string ReadLoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

// KV blocks for max(batches) sequences of prompt_len + max_tokens positions: the whole workload
// fits at once, so nothing is preempted.
int64_t WorkloadBlocks(const Flags& flags) {
  const int64_t max_batch = *std::max_element(flags.batches.begin(), flags.batches.end());
  const int64_t per_sequence =
      (flags.prompt_len + flags.max_tokens + flags.block_size - 1) / flags.block_size;
  // The engine keeps one spare block for a lone sequence (copy-on-write), so batch 1 needs it.
  return std::max(max_batch * per_sequence, per_sequence + 1);
}

// Seconds of one pass of every matrix product of a decode step at `batch` rows (the layers'
// projections and the LM head, stock LibTorch matmul, best of 5): a floor for any decode step
// on this BLAS and thread count, whoever drives it.
double MatmulFloorSeconds(const Transformer& model, int64_t batch) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> weights;
  for (const auto& [name, tensor] : StateDict(model)) {
    if (tensor.dim() == 2 && name != "model.embed_tokens.weight") weights.push_back(tensor);
  }
  weights.push_back(model.lm_head_weight());
  std::vector<torch::Tensor> inputs;
  for (const torch::Tensor& weight : weights)
    inputs.push_back(torch::randn({batch, weight.size(1)}));
  double best = 1e30;
  for (int run = 0; run < 6; ++run) {
    const double start = ProcessCpuSeconds();
    for (size_t i = 0; i < weights.size(); ++i) torch::matmul(inputs[i], weights[i].t());
    if (run > 0) best = std::min(best, ProcessCpuSeconds() - start);  // run 0 warms up
  }
  return best;
}

// Seconds to read every weight of `model` once on `threads` threads (each streams an equal
// contiguous share of the parameters; the best of 5 plain and 5 prefetching passes, alternated,
// after one warm-up; stream_read.h): a decode step reads all of them, so batch / this is the
// most decode tokens per second any implementation with that many threads can reach on this
// machine's memory bandwidth at this moment (the weights do not fit in cache).
double WeightStreamSeconds(const Transformer& model, int threads) {
  std::vector<FloatSpan> spans;
  for (const auto& [name, tensor] : StateDict(model)) {
    spans.push_back({tensor.data_ptr<float>(), tensor.numel()});
  }
  double best = 1e30;
  std::vector<float> sums(threads);
  for (int run = 0; run < 11; ++run) {
    const StreamReadForm form =
        run % 2 == 0 ? StreamReadForm::kPlain : StreamReadForm::kPrefetching;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) {
      pool.emplace_back([&, t] { sums[t] = StreamReadShare(spans, t, threads, form); });
    }
    sums[0] = StreamReadShare(spans, 0, threads, form);
    for (std::thread& thread : pool) thread.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run > 0) best = std::min(best, seconds);
  }
  volatile float sink = 0;
  for (float sum : sums) sink = sink + sum;
  return best;
}

// --worker MODE: one numeric mode, every batch size, one JSON file.
int RunWorker(const Flags& flags, const ModelConfig& config) {
  ModelOptions options;
  absl::StatusOr<NumericMode> mode = ParseNumericMode(flags.worker_mode);
  if (!mode.ok()) return Fail(mode.status());
  options.numeric_mode = *mode;
  // Resident before any model exists: mostly LibTorch's shared libraries, mapped and relocated.
  absl::StatusOr<double> baseline = ProcStatusMib("VmRSS");
  if (!baseline.ok()) return Fail(baseline.status());
  // Loaded from disk as `lockstep serve generator --model DIR` loads it, so that the peak is
  // the service's own.
  absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(flags.worker_model_dir, options);
  if (!loaded.ok()) return Fail(loaded.status());
  std::shared_ptr<Transformer> model = *std::move(loaded);
  const int64_t max_batch = *std::max_element(flags.batches.begin(), flags.batches.end());
  generator::EngineOptions engine_options;
  engine_options.block_size = flags.block_size;
  engine_options.kv_cache_bytes =
      WorkloadBlocks(flags) * generator::BlockManager::BytesPerBlock(config, flags.block_size);
  engine_options.scheduler.max_num_seqs = max_batch;
  engine_options.scheduler.max_num_batched_tokens = max_batch * flags.prompt_len;
  absl::StatusOr<std::unique_ptr<generator::Engine>> engine =
      generator::Engine::Create(model, engine_options);
  if (!engine.ok()) return Fail(engine.status());

  // Warm-up (not reported): first forwards, batch-invariant weight packing, allocator growth.
  absl::StatusOr<WorkloadResult> warm_up = RunDecodeWorkload(
      **engine, std::min<int64_t>(max_batch, 8), flags.prompt_len, 4, config.vocab_size);
  if (!warm_up.ok()) return Fail(warm_up.status());

  nlohmann::json json = {{"mode", flags.worker_mode},
                         {"threads", torch::get_num_threads()},
                         {"kernel_threads", kernels::KernelThreads()},
                         {"kv_blocks", (*engine)->block_manager().num_blocks()}};
  const int threads = static_cast<int>(torch::get_num_threads());
  const double weight_bytes = static_cast<double>(config.NumParameters()) * sizeof(float);
  for (int64_t batch : flags.batches) {
    // Each repeat reads the memory floor just before and just after its run: on a VM the
    // bandwidth the guest gets can change between runs (a 2-vCPU AMD EPYC guest read 33-36 or
    // 55-62 GB/s, minute to minute), so a floor read at another moment is another machine's.
    // The batch's figures are those of the repeat whose ratio to its own floor (the faster read)
    // is the median: one lucky or unlucky moment neither makes nor breaks the ratio.
    std::vector<nlohmann::json> runs;
    for (int repeat = 0; repeat < flags.repeats; ++repeat) {
      const double floor_before = WeightStreamSeconds(*model, threads);
      absl::StatusOr<WorkloadResult> result =
          RunDecodeWorkload(**engine, batch, flags.prompt_len, flags.max_tokens, config.vocab_size);
      if (!result.ok()) return Fail(result.status());
      const double floor_after = WeightStreamSeconds(*model, threads);
      if ((*engine)->block_manager().num_free_blocks() != (*engine)->block_manager().num_blocks()) {
        return Fail(absl::InternalError("KV blocks leaked after the workload"));
      }
      const double roofline = batch / std::min(floor_before, floor_after);
      runs.push_back({{"batch", batch},
                      {"prefill_seconds", result->prefill_seconds},
                      {"decode_seconds", result->decode_seconds},
                      {"decode_tokens", result->decode_tokens},
                      {"decode_tokens_per_s", result->DecodeTokensPerSecond()},
                      {"prefill_cpu_seconds", result->prefill_cpu_seconds},
                      {"decode_cpu_seconds", result->decode_cpu_seconds},
                      {"decode_tokens_per_cpu_s", result->DecodeTokensPerCpuSecond()},
                      {"tokens_per_s", result->TokensPerSecond()},
                      {"num_preemptions", result->num_preemptions},
                      {"weight_stream_seconds_before", floor_before},
                      {"weight_stream_seconds_after", floor_after},
                      {"weight_stream_gbps_before", weight_bytes / floor_before / 1e9},
                      {"weight_stream_gbps_after", weight_bytes / floor_after / 1e9},
                      {"vs_roofline", result->DecodeTokensPerSecond() / roofline},
                      {"tokens", result->tokens}});
    }
    std::vector<double> ratios;
    for (const nlohmann::json& run : runs) ratios.push_back(run["vs_roofline"].get<double>());
    std::sort(runs.begin(), runs.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a["vs_roofline"].get<double>() < b["vs_roofline"].get<double>();
    });
    nlohmann::json median = runs[(runs.size() - 1) / 2];
    median["vs_roofline_repeats"] = ratios;  // in run order
    json["batches"].push_back(median);
    std::fprintf(stderr,
                 "  [%s] batch %ld: %.1f decode tokens/s (%.1f per CPU second), %.2f of the "
                 "memory floor (median of %d)\n",
                 flags.worker_mode.c_str(), static_cast<long>(batch),
                 median["decode_tokens_per_s"].get<double>(),
                 median["decode_tokens_per_cpu_s"].get<double>(),
                 median["vs_roofline"].get<double>(), flags.repeats);
  }
  absl::StatusOr<double> peak = ProcStatusMib("VmHWM");  // before the floor's scratch tensors
  if (options.numeric_mode == NumericMode::kFast) {
    for (int64_t batch : flags.batches) {
      json["matmul_floor_decode_tokens_per_cpu_s"][std::to_string(batch)] =
          batch / MatmulFloorSeconds(*model, batch);
    }
  }
  if (!peak.ok()) return Fail(peak.status());
  json["peak_rss_mb"] = *peak;
  json["baseline_rss_mb"] = *baseline;
  std::ofstream(flags.worker_out) << json.dump() << "\n";
  return 0;
}

const nlohmann::json* FindBatch(const nlohmann::json& worker, int64_t batch) {
  for (const nlohmann::json& entry : worker["batches"]) {
    if (entry["batch"].get<int64_t>() == batch) return &entry;
  }
  return nullptr;
}

// Fraction of generated tokens equal at the same position (greedy runs of the same weights).
double TokenAgreement(const nlohmann::json& a, const nlohmann::json& b) {
  int64_t equal = 0, total = 0;
  for (size_t s = 0; s < a.size() && s < b.size(); ++s) {
    for (size_t t = 0; t < a[s].size() && t < b[s].size(); ++t) {
      equal += a[s][t].get<int64_t>() == b[s][t].get<int64_t>();
      ++total;
    }
  }
  return total == 0 ? 0.0 : static_cast<double>(equal) / total;
}

int RunBenchmark(const Flags& flags, const ModelConfig& config, const char* self) {
  if (std::find(flags.batches.begin(), flags.batches.end(), flags.ratio_batch) ==
      flags.batches.end()) {
    return Fail(absl::InvalidArgumentError("--ratio-batch must be one of --batches"));
  }
  absl::StatusOr<TemporaryDirectory> dir = TemporaryDirectory::Create("bench_generator");
  if (!dir.ok()) return Fail(dir.status());
  const std::filesystem::path model_dir = dir->path() / "model";
  {
    std::shared_ptr<Transformer> model = CreateRandomModel(config, flags.model_seed);
    if (absl::Status s = SaveModel(*model, model_dir); !s.ok()) return Fail(s);
  }
  const std::string load_at_start = ReadLoadAverage();
  const int threads = torch::get_num_threads();
  // Debian's LibTorch 1.13 calls OpenBLAS (pthread build), whose own thread pool ignores
  // torch::set_num_threads and defaults to every core: measured here, that makes a 1-thread
  // sgemm 2-4x slower in CPU time on a shared machine. Every child (both engine modes and
  // Python) gets OPENBLAS_NUM_THREADS = the thread count, unless the caller set it.
  setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), /*overwrite=*/0);
  const std::string openblas_threads = getenv("OPENBLAS_NUM_THREADS");
  const double weights_mb = config.NumParameters() * sizeof(float) / kMib;
  const int64_t kv_blocks = WorkloadBlocks(flags);
  const double kv_pool_mb =
      kv_blocks * generator::BlockManager::BytesPerBlock(config, flags.block_size) / kMib;
  std::string batches_text;
  for (int64_t batch : flags.batches)
    absl::StrAppend(&batches_text, batches_text.empty() ? "" : ",", batch);
  std::printf(
      "bench_generator: %s %s (%.1fM params), %d threads (OPENBLAS_NUM_THREADS=%s); per batch size "
      "B: B prompts of %ld "
      "tokens, %ld generated tokens each (greedy, no EOS), all submitted at once; KV pool %ld "
      "blocks x %ld\n",
      flags.arch.c_str(), flags.preset.c_str(), config.NumParameters() / 1e6, threads,
      openblas_threads.c_str(), static_cast<long>(flags.prompt_len),
      static_cast<long>(flags.max_tokens), static_cast<long>(kv_blocks),
      static_cast<long>(flags.block_size));
  std::fflush(stdout);

  const std::vector<std::string> modes = {"fast", "batch_invariant"};
  std::map<std::string, nlohmann::json> workers;
  for (const std::string& mode : modes) {
    const std::filesystem::path out = dir->path() / (mode + ".json");
    absl::Status s = RunChildProcess({self,
                                      "--worker",
                                      mode,
                                      "--worker-out",
                                      out.string(),
                                      "--worker-model-dir",
                                      model_dir.string(),
                                      "--preset",
                                      flags.preset,
                                      "--arch",
                                      flags.arch,
                                      "--batches",
                                      batches_text,
                                      "--prompt-len",
                                      std::to_string(flags.prompt_len),
                                      "--max-tokens",
                                      std::to_string(flags.max_tokens),
                                      "--block-size",
                                      std::to_string(flags.block_size),
                                      "--model-seed",
                                      std::to_string(flags.model_seed),
                                      "--threads",
                                      std::to_string(threads),
                                      "--repeats",
                                      std::to_string(flags.repeats),
                                      "--simd",
                                      flags.simd});
    if (!s.ok()) return Fail(s);
    absl::StatusOr<nlohmann::json> json = ReadJson(out);
    if (!json.ok()) return Fail(json.status());
    workers[mode] = *std::move(json);
  }

  // The Python reference at the ratio batch, on the prompts the engine got.
  const std::filesystem::path prompts_path = dir->path() / "prompts.json";
  {
    nlohmann::json prompts = nlohmann::json::array();
    for (int64_t s = 0; s < flags.ratio_batch; ++s) {
      prompts.push_back(WorkloadPrompt(s, flags.prompt_len, config.vocab_size));
    }
    std::ofstream(prompts_path) << prompts.dump() << "\n";
  }
  const std::filesystem::path python_out = dir->path() / "python.json";
  // With more than one thread, torch's OpenMP workers spin after each elementwise op (libgomp's
  // default wait policy) on the cores OpenBLAS's own pool needs for the next matmul: measured
  // here at b8 with 2 threads, 33.1 decode tokens/s spinning, 71.3 passive (1 thread: 52.8).
  // The reference gets its best setting, unless the caller chose one. The engine workers keep
  // the default: they have no second pool, and spinning is faster for them.
  if (threads > 1) setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  const char* python_wait_policy = getenv("OMP_WAIT_POLICY");
  if (absl::Status s =
          RunChildProcess({flags.python, flags.script, "--model", model_dir.string(), "--prompts",
                           prompts_path.string(), "--max-tokens", std::to_string(flags.max_tokens),
                           "--threads", std::to_string(threads), "--out", python_out.string()});
      !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<nlohmann::json> python = ReadJson(python_out);
  if (!python.ok()) return Fail(python.status());

  // JSON and table: per mode and batch, wall-clock and CPU-time decode throughput.
  nlohmann::json json = {{"preset", flags.preset},
                         {"arch", flags.arch},
                         {"parameters", config.NumParameters()},
                         {"threads", threads},
                         {"openblas_num_threads", openblas_threads},
                         {"batches", flags.batches},
                         {"prompt_len", flags.prompt_len},
                         {"max_tokens", flags.max_tokens},
                         {"block_size", flags.block_size},
                         {"kv_blocks", kv_blocks},
                         {"weights_mb", weights_mb},
                         {"kv_pool_mb", kv_pool_mb},
                         {"load_average_at_start", load_at_start},
                         {"load_average_at_end", ReadLoadAverage()}};
  const std::string rb = absl::StrCat("_b", flags.ratio_batch);
  for (const std::string& mode : modes) {
    for (int64_t batch : flags.batches) {
      const nlohmann::json& entry = *FindBatch(workers[mode], batch);
      const std::string key = absl::StrCat("_b", batch);
      for (const char* field :
           {"decode_tokens_per_s", "decode_tokens_per_cpu_s", "tokens_per_s", "prefill_seconds",
            "decode_seconds", "prefill_cpu_seconds", "decode_cpu_seconds", "num_preemptions"}) {
        json[mode + "_" + field + key] = entry[field];
      }
    }
  }
  for (const char* field :
       {"decode_tokens_per_s", "decode_tokens_per_cpu_s", "tokens_per_s", "prefill_seconds",
        "decode_seconds", "prefill_cpu_seconds", "decode_cpu_seconds"}) {
    json[std::string("python_") + field + rb] = (*python)[field];
  }
  for (int64_t batch : flags.batches) {
    json[absl::StrCat("matmul_floor_decode_tokens_per_cpu_s_b", batch)] =
        workers["fast"]["matmul_floor_decode_tokens_per_cpu_s"][std::to_string(batch)];
  }
  // The memory floor of each run (every decode step reads all the weights once): the faster of
  // the reads just before and just after it, so that a slow moment never flatters a ratio.
  const double weight_bytes = static_cast<double>(config.NumParameters()) * sizeof(float);
  for (const std::string& mode : modes) {
    for (int64_t batch : flags.batches) {
      const nlohmann::json& entry = *FindBatch(workers[mode], batch);
      const double before = entry["weight_stream_seconds_before"].get<double>();
      const double after = entry["weight_stream_seconds_after"].get<double>();
      const std::string key = absl::StrCat("_b", batch);
      json[mode + "_weight_stream_gbps_before" + key] = entry["weight_stream_gbps_before"];
      json[mode + "_weight_stream_gbps_after" + key] = entry["weight_stream_gbps_after"];
      json[mode + "_roofline_decode_tokens_per_s" + key] = batch / std::min(before, after);
      json[mode + "_vs_roofline" + key] = entry["vs_roofline"];
      json[mode + "_vs_roofline_repeats" + key] = entry["vs_roofline_repeats"];
    }
  }
  for (int64_t batch : flags.batches) {
    const std::string key = absl::StrCat("_b", batch);
    json["roofline_decode_tokens_per_s" + key] = json["fast_roofline_decode_tokens_per_s" + key];
  }
  json["weight_stream_gbps"] = weight_bytes *
                               json["roofline_decode_tokens_per_s" + rb].get<double>() /
                               flags.ratio_batch / 1e9;
  json["weight_stream_lanes"] = StreamReadLanes();  // floats a load of the floor read
  json["python_threads"] = (*python)["threads"];
  json["python_omp_wait_policy"] = python_wait_policy != nullptr ? python_wait_policy : "";
  json["kernel_threads"] = workers["fast"]["kernel_threads"];
  json["simd_level"] = SimdLevelName(kernels::ActiveSimdLevel());
  json["python_torch_version"] = (*python)["torch_version"];

  for (const char* unit : {"decode_tokens_per_s", "decode_tokens_per_cpu_s"}) {
    const bool cpu = std::string(unit) == "decode_tokens_per_cpu_s";
    std::printf("  %-40s", cpu ? "decode tokens per CPU second" : "decode tokens/s (wall clock)");
    for (int64_t batch : flags.batches) std::printf(" %10s", absl::StrCat("batch ", batch).c_str());
    std::printf("\n");
    std::vector<std::string> rows = {"fast", "batch_invariant", "python"};
    if (cpu) rows.push_back("matmul_floor");
    if (!cpu) rows.push_back("roofline");
    for (const std::string& mode : rows) {
      std::printf("    %-38s",
                  mode == "python"
                      ? absl::StrCat("python reference (torch ",
                                     (*python)["torch_version"].get<std::string>(), ")")
                            .c_str()
                  : mode == "matmul_floor" ? "matmuls only (LibTorch, no attention)"
                  : mode == "roofline"     ? "memory floor (weights read once a step)"
                                           : (mode + " (engine)").c_str());
      for (int64_t batch : flags.batches) {
        const std::string key = mode == "roofline"
                                    ? absl::StrCat("roofline_decode_tokens_per_s_b", batch)
                                    : absl::StrCat(mode, "_", unit, "_b", batch);
        if (json.contains(key)) {
          std::printf(" %10.1f", json[key].get<double>());
        } else {
          std::printf(" %10s", "-");
        }
      }
      std::printf("\n");
    }
  }
  std::printf("  %-40s", "end-to-end tokens/s, prefill included");
  for (int64_t batch : flags.batches) {
    std::printf(" %10.1f", json[absl::StrCat("fast_tokens_per_s_b", batch)].get<double>());
  }
  std::printf("  (fast)\n");

  auto rate = [&](const std::string& who, const char* unit) {
    return json[who + "_" + unit + rb].get<double>();
  };
  const double bi_vs_fast =
      rate("batch_invariant", "decode_tokens_per_s") / rate("fast", "decode_tokens_per_s");
  const double vs_python =
      rate("fast", "decode_tokens_per_s") / rate("python", "decode_tokens_per_s");
  const double vs_python_invariant =
      rate("batch_invariant", "decode_tokens_per_s") / rate("python", "decode_tokens_per_s");
  const double bi_vs_fast_cpu =
      rate("batch_invariant", "decode_tokens_per_cpu_s") / rate("fast", "decode_tokens_per_cpu_s");
  const double vs_python_cpu =
      rate("fast", "decode_tokens_per_cpu_s") / rate("python", "decode_tokens_per_cpu_s");
  const double agreement = TokenAgreement(
      FindBatch(workers["fast"], flags.ratio_batch)->at("tokens"), (*python)["tokens"]);
  const double peak_fast = workers["fast"]["peak_rss_mb"].get<double>();
  const double peak_invariant = workers["batch_invariant"]["peak_rss_mb"].get<double>();
  const double peak = std::max(peak_fast, peak_invariant);
  const double peak_limit = kPeakRssFactor * (weights_mb + kv_pool_mb);
  json["bi_vs_fast" + rb] = bi_vs_fast;
  json["vs_python" + rb] = vs_python;
  json["vs_python" + rb + "_batch_invariant"] = vs_python_invariant;
  json["bi_vs_fast" + rb + "_cpu"] = bi_vs_fast_cpu;
  json["vs_python" + rb + "_cpu"] = vs_python_cpu;
  json["python_greedy_token_agreement" + rb] = agreement;
  // The largest vs_python any engine could show in this run: the memory floor over Python.
  const double roofline_vs_python = json["roofline_decode_tokens_per_s" + rb].get<double>() /
                                    rate("python", "decode_tokens_per_s");
  json["roofline_vs_python" + rb] = roofline_vs_python;
  json["peak_rss_mb"] = peak;
  json["peak_rss_mb_fast"] = peak_fast;
  json["peak_rss_mb_batch_invariant"] = peak_invariant;
  json["peak_rss_limit_mb"] = peak_limit;
  double peak_above_baseline = 0;
  for (const std::string& mode : modes) {
    const double baseline = workers[mode]["baseline_rss_mb"].get<double>();
    json["baseline_rss_mb_" + mode] = baseline;
    peak_above_baseline =
        std::max(peak_above_baseline, workers[mode]["peak_rss_mb"].get<double>() - baseline);
  }
  json["peak_rss_above_baseline_mb"] = peak_above_baseline;
  json["targets"] = {
      {"bi_vs_fast" + rb, {{"min", kBiVsFastTarget}, {"met", bi_vs_fast >= kBiVsFastTarget}}},
      {"vs_python" + rb, {{"min", kVsPythonTarget}, {"met", vs_python >= kVsPythonTarget}}},
      {"peak_rss_mb", {{"max", peak_limit}, {"met", peak <= peak_limit}}},
      // The same bound on what the generator itself allocates: the process's RSS before any
      // model exists (LibTorch's shared libraries, ~150 MB here) is a fixed cost of the library
      // build, not of the weights or the KV pool.
      {"peak_rss_above_baseline_mb",
       {{"max", peak_limit}, {"met", peak_above_baseline <= peak_limit}}}};

  auto verdict = [](bool met) { return met ? "met" : "MISSED"; };
  std::printf("  %-40s %10.3f  (target >= %.2f: %s; CPU time: %.3f)\n", ("bi_vs_fast" + rb).c_str(),
              bi_vs_fast, kBiVsFastTarget, verdict(bi_vs_fast >= kBiVsFastTarget), bi_vs_fast_cpu);
  std::printf("  %-40s %10.3f  (target >= %.1f: %s; CPU time: %.3f; batch_invariant: %.3f)\n",
              ("vs_python" + rb + " (fast)").c_str(), vs_python, kVsPythonTarget,
              verdict(vs_python >= kVsPythonTarget), vs_python_cpu, vs_python_invariant);
  std::printf(
      "  %-40s %10.3f  (memory floor / python: the most any engine could show here; "
      "weights streamed at %.1f GB/s in %d-float loads, plain or prefetching; fast engine at %.2f "
      "of the floor)\n",
      ("roofline_vs_python" + rb).c_str(), roofline_vs_python,
      json["weight_stream_gbps"].get<double>(), StreamReadLanes(),
      json["fast_vs_roofline" + rb].get<double>());
  std::printf(
      "  against the memory floor read just before and after each run (the faster read); the "
      "median of %d runs\n",
      flags.repeats);
  std::printf("  %-40s", "");
  for (int64_t batch : flags.batches) std::printf(" %10s", absl::StrCat("batch ", batch).c_str());
  std::printf("\n");
  for (const std::string& mode : modes) {
    std::printf("    %-38s", absl::StrCat(mode, "_vs_roofline").c_str());
    for (int64_t batch : flags.batches) {
      std::printf(" %10.3f", json[absl::StrCat(mode, "_vs_roofline_b", batch)].get<double>());
    }
    std::printf("\n    %-38s", "  floor GB/s before / after");
    for (int64_t batch : flags.batches) {
      std::printf(" %10s",
                  absl::StrFormat(
                      "%.0f/%.0f",
                      json[absl::StrCat(mode, "_weight_stream_gbps_before_b", batch)].get<double>(),
                      json[absl::StrCat(mode, "_weight_stream_gbps_after_b", batch)].get<double>())
                      .c_str());
    }
    std::printf("\n    %-38s", "  all runs, lowest-highest");
    for (int64_t batch : flags.batches) {
      const std::vector<double> repeats =
          json[absl::StrCat(mode, "_vs_roofline_repeats_b", batch)].get<std::vector<double>>();
      std::printf(" %10s",
                  absl::StrFormat("%.2f-%.2f", *std::min_element(repeats.begin(), repeats.end()),
                                  *std::max_element(repeats.begin(), repeats.end()))
                      .c_str());
    }
    std::printf("\n");
  }
  std::printf("  %-40s %10.3f\n", ("python greedy token agreement" + rb).c_str(), agreement);
  std::printf("  %-40s %10.1f  (fast %.1f, batch_invariant %.1f)\n", "peak_rss_mb", peak, peak_fast,
              peak_invariant);
  std::printf("  %-40s %10.1f  (weights %.1f + kv_pool %.1f; target peak <= %.1f: %s)\n",
              "weights_mb + kv_pool_mb", weights_mb + kv_pool_mb, weights_mb, kv_pool_mb,
              peak_limit, verdict(peak <= peak_limit));
  std::printf(
      "  %-40s %10.1f  (peak minus RSS before the model, max over modes; baseline %.1f; "
      "same limit: %s)\n",
      "peak_rss_above_baseline_mb", peak_above_baseline, json["baseline_rss_mb_fast"].get<double>(),
      verdict(peak_above_baseline <= peak_limit));
  std::printf("  %-40s %10d  (threads the kernels' tiles ran on; intra-op threads %d)\n",
              "kernel_threads", json["kernel_threads"].get<int>(), threads);
  std::printf("  %-40s %10s  (widest SIMD level of our kernels, --simd)\n", "simd_level",
              json["simd_level"].get<std::string>().c_str());
  std::printf("  %-40s %s -> %s\n", "load average (1, 5, 15 min)",
              json["load_average_at_start"].get<std::string>().c_str(),
              json["load_average_at_end"].get<std::string>().c_str());
  if (!flags.json_path.empty()) {
    std::ofstream(flags.json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", flags.json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep;
  using namespace lockstep::bench;
  CLI::App app{"bench_generator: generator decode throughput, both modes, vs a Python loop"};
  Flags flags;
  app.add_option("--preset", flags.preset)->capture_default_str();
  app.add_option("--arch", flags.arch, "qwen3 or qwen3_moe (the Python reference runs both)")
      ->check(CLI::IsMember({"qwen3", "qwen3_moe"}))
      ->capture_default_str();
  app.add_option("--json", flags.json_path, "Write results as JSON here");
  app.add_option("--batches", flags.batches, "Batch sizes (concurrent requests)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--ratio-batch", flags.ratio_batch, "Batch of the ratios and the Python run")
      ->capture_default_str();
  app.add_option("--prompt-len", flags.prompt_len)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-tokens", flags.max_tokens, "Generated tokens per request")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--block-size", flags.block_size)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--model-seed", flags.model_seed)->capture_default_str();
  app.add_option("--threads", flags.threads,
                 "Intra-op threads (0 = as lockstep serve: the physical cores)");
  app.add_option("--repeats", flags.repeats,
                 "Workload runs per mode and batch, each between two memory-floor reads; the "
                 "median run (by its ratio to its own floor) is reported")
      ->check(CLI::Range(1, 99))
      ->capture_default_str();
  app.add_option("--python", flags.python, "Python with torch")->capture_default_str();
  app.add_option("--script", flags.script, "reference_generate.py")->capture_default_str();
  app.add_option("--worker", flags.worker_mode, "internal: run one numeric mode")
      ->check(CLI::IsMember({"fast", "batch_invariant"}));
  app.add_option("--worker-out", flags.worker_out, "internal: worker JSON output");
  app.add_option("--worker-model-dir", flags.worker_model_dir, "internal: the model to load");
  AddSimdOption(app, &flags.simd);
  CLI11_PARSE(app, argc, argv);
  if (!ApplySimdLevel(flags.simd)) return 2;
  SetComputeThreads(flags.threads);
  for (int64_t batch : flags.batches) {
    if (batch <= 0) return Fail(absl::InvalidArgumentError("--batches must all be > 0"));
  }

  // Qwen3 dense or MoE: the Python reference implements those two.
  absl::StatusOr<Architecture> arch = ParseArchitectureName(flags.arch);
  if (!arch.ok()) return Fail(arch.status());
  absl::StatusOr<ModelConfig> config = PresetConfig(*arch, flags.preset);
  if (!config.ok()) return Fail(config.status());
  if (!flags.worker_mode.empty()) return RunWorker(flags, *config);
  return RunBenchmark(flags, *config, "/proc/self/exe");
}
