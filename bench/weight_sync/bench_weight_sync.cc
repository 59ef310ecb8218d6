// Weight-sync benchmark: broadcast of the base preset's parameters (~100M, fp32) and of a ~500M
// synthetic set from rank 0 to 1 and 2 receiver processes on this host, over both transports
// (the default, auto, which is shared memory on one host; and Gloo over loopback TCP), next to a
// plain memcpy of the same bytes measured in the same run; and the generation stall of a hot
// swap of the base preset into a running engine.
//
//   build/bench/bench_weight_sync [--json FILE] [--iterations 2] [--skip-large] [--skip-swap]
//
// sync time = rank 0's WeightSyncGroup::Send (version header + every bucket, verify off; the
// receivers allocate a fresh fp32 staging copy each time, as a generator does).
// sync_vs_memcpy = sync time / memcpy time (target <= 3 with one receiver). Headline keys:
// sync_gbps / sync_vs_memcpy (default transport, worst one-receiver set), the same with _gloo
// (transport forced to Gloo), and _2recv variants of all four (two receivers); `transport` names
// the one the default resolved to. On shared memory the Send returns once every receiver has
// copied the last bucket out, so the time covers the whole transfer.
// swap_pause_ms = the generation stall of a hot swap of the base preset, requests in flight: the
// extra time of the engine step that follows the swap (pointer swap + anything the first forward
// after it pays, e.g. repacking) over a normal decode step; median of 3, the worse of the fast and
// batch-invariant modes (target <= 50 ms). The weights are prepared (cast, packed) on another
// thread meanwhile, as GeneratorService.ReceiveWeights does.
// Receivers are this binary re-executed with --peer.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/median.h"
#include "generator/engine_loop.h"
#include "model/checkpoint.h"
#include "model/compute_threads.h"
#include "nlohmann/json.hpp"
#include "tests/weight_sync/child_process.h"
#include "weight_sync/large_buffer.h"
#include "weight_sync/sync_group.h"

namespace lockstep::weight_sync {
namespace {

using Clock = std::chrono::steady_clock;
using bench::Median;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU time of the calling thread (ms) and of the whole process (s): on a loaded machine wall time
// is mostly waiting for a core, CPU time is the work itself.
double ThreadCpuMs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return now.tv_sec + now.tv_nsec / 1e9;
}

// Random fp32 tensors with the given manifest (values do not matter for speed).
TensorMap FilledParams(const Manifest& manifest) {
  TensorMap params;
  for (const auto& [name, shape] : manifest.entries) {
    params[name] = torch::empty(shape, torch::kFloat32).uniform_(-1, 1);
  }
  return params;
}

Manifest BaseManifest() {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "base");
  return ManifestOf(StateDict(*CreateRandomModel(config, 1)));
}

// ~503M parameters: 40 matrices of 3072 x 4096 plus a few odd-sized vectors.
Manifest LargeManifest() {
  Manifest manifest;
  for (int i = 0; i < 40; ++i) {
    manifest.entries.push_back({absl::StrCat("layers.", i / 10, i % 10, ".weight"), {3072, 4096}});
    manifest.entries.push_back({absl::StrCat("layers.", i / 10, i % 10, ".norm"), {4099}});
  }
  std::sort(manifest.entries.begin(), manifest.entries.end());  // manifests are sorted by name
  return manifest;
}

// Plain memcpy of every tensor into a pre-faulted destination of the same total size.
double MemcpySeconds(const TensorMap& params, int64_t total_bytes, int iterations) {
  std::vector<char> destination(static_cast<size_t>(total_bytes));
  std::memset(destination.data(), 1, destination.size());  // fault the pages in first
  std::vector<double> times;
  for (int i = 0; i < iterations + 1; ++i) {
    const Clock::time_point start = Clock::now();
    size_t offset = 0;
    for (const auto& [name, tensor] : params) {
      const size_t bytes = static_cast<size_t>(tensor.numel()) * 4;
      std::memcpy(destination.data() + offset, tensor.data_ptr(), bytes);
      offset += bytes;
    }
    if (i > 0) times.push_back(Seconds(start));  // the first pass warms up
  }
  return Median(times);
}

struct SyncFigures {
  double seconds = 0;
  int64_t num_buckets = 0;
  double sender_cpu_seconds = 0;           // rank 0's process CPU time during the Send
  Transport transport = Transport::kGloo;  // the one the group used
};

absl::StatusOr<SyncFigures> MeasureSync(const std::string& set, const Manifest& manifest,
                                        const TensorMap& params, int receivers, int iterations,
                                        int64_t bucket_bytes, Transport transport) {
  const int port = testing::FreeLoopbackPort();
  const std::string manifest_path =
      absl::StrCat("/tmp/bench_weight_sync_", getpid(), "_", set, ".manifest");
  std::ofstream(manifest_path) << EncodeManifest(manifest);
  const std::string group = absl::StrCat(set, "-", receivers, "-", TransportName(transport));
  std::vector<std::unique_ptr<testing::ChildProcess>> peers;
  for (int r = 1; r <= receivers; ++r) {
    peers.push_back(std::make_unique<testing::ChildProcess>(std::vector<std::string>{
        "/proc/self/exe", "--peer", "--port=" + std::to_string(port), "--rank=" + std::to_string(r),
        "--world_size=" + std::to_string(receivers + 1), "--group=" + group,
        "--manifest=" + manifest_path, "--iterations=" + std::to_string(iterations + 1),
        "--bucket_bytes=" + std::to_string(bucket_bytes),
        std::string("--transport=") + TransportName(transport)}));
  }
  GroupOptions options;
  options.store_port = port;
  options.world_size = receivers + 1;
  options.group_name = group;
  options.bucket_bytes = bucket_bytes;
  options.timeout = std::chrono::milliseconds(120000);
  options.transport = transport;
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> sender =
      WeightSyncGroup::Join(options, manifest);
  if (!sender.ok()) return sender.status();
  std::vector<double> times, cpu_times;
  for (int i = 0; i < iterations + 1; ++i) {
    const Clock::time_point start = Clock::now();
    const double cpu_start = ProcessCpuSeconds();
    if (absl::Status s = (*sender)->Send(params, i); !s.ok()) return s;
    if (i > 0) {  // the first round warms up
      times.push_back(Seconds(start));
      cpu_times.push_back(ProcessCpuSeconds() - cpu_start);
    }
  }
  for (auto& peer : peers) {
    std::optional<int> code = peer->Wait(std::chrono::milliseconds(60000));
    if (code != 0) {
      return absl::InternalError(
          absl::StrCat("receiver exited with ", code.value_or(-1), ": ", peer->output()));
    }
  }
  std::remove(manifest_path.c_str());
  return SyncFigures{Median(times), (*sender)->num_buckets(), Median(cpu_times),
                     (*sender)->transport()};
}

int RunPeer(const GroupOptions& base_options, const std::string& manifest_path, int iterations) {
  std::ifstream in(manifest_path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Manifest> manifest = DecodeManifest(text.str());
  if (!manifest.ok()) return 3;
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> group =
      WeightSyncGroup::Join(base_options, *manifest);
  if (!group.ok()) {
    std::printf("join: %s\n", group.status().ToString().c_str());
    return 2;
  }
  for (int i = 0; i < iterations; ++i) {
    absl::StatusOr<TensorMap> received = (*group)->Receive(i, torch::kFloat32);
    if (!received.ok()) {
      std::printf("receive: %s\n", received.status().ToString().c_str());
      return 2;
    }
  }
  return 0;
}

struct SwapFigures {
  double stall_ms = 0;      // the extra time the swap step took: the generation stall
  double stall_cpu_ms = 0;  // the same in engine-thread CPU time (robust to a loaded machine)
  double apply_ms = 0;      // ApplyPreparedWeights alone (the pointer swap)
  double step_ms = 0;       // a normal decode step next to it
  double prepare_ms = 0;    // PrepareWeights (checks, casts, packing), off the engine thread
};

// The generation stall of a hot swap of the base preset in `mode`, measured the way a user sees
// it: the engine steps on this thread with requests in flight while another thread prepares the
// next weights (as GeneratorService.ReceiveWeights does); then
//   stall = (time from the end of a step to the end of the next one, with the swap between them)
//           - (median time of the normal decode steps just before),
// so a repack or a page-fault storm at the first forward after the swap counts too.
absl::StatusOr<SwapFigures> MeasureSwapStall(NumericMode mode) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "base");
  ModelOptions model_options;
  model_options.numeric_mode = mode;
  std::shared_ptr<Transformer> model = CreateRandomModel(config, 1, model_options);
  generator::EngineOptions engine_options;
  engine_options.kv_cache_bytes = int64_t{64} << 20;
  absl::StatusOr<std::unique_ptr<generator::Engine>> created =
      generator::Engine::Create(model, engine_options);
  if (!created.ok()) return created.status();
  generator::Engine& engine = **created;
  const TensorMap fresh = StateDict(*CreateRandomModel(config, 2, model_options));
  uint64_t seed = 0;
  auto keep_busy = [&]() -> absl::Status {
    while (engine.num_running() + engine.num_waiting() < 2) {
      generator::Request request;
      request.prompt = {1, 2, 3, 4, 5, 6, 7, 8};
      request.params.max_tokens = 64;
      request.seed = ++seed;
      if (absl::StatusOr<int64_t> id = engine.AddRequest(request); !id.ok()) return id.status();
    }
    return absl::OkStatus();
  };
  double last_step_cpu_ms = 0;
  auto timed_step = [&]() -> absl::StatusOr<double> {
    if (absl::Status s = keep_busy(); !s.ok()) return s;
    const Clock::time_point start = Clock::now();
    const double cpu_start = ThreadCpuMs();
    if (absl::StatusOr<std::vector<generator::SampleOutput>> out = engine.Step(); !out.ok()) {
      return out.status();
    }
    last_step_cpu_ms = ThreadCpuMs() - cpu_start;
    return Seconds(start) * 1e3;
  };
  for (int i = 0; i < 3; ++i) {  // prefill, warm-up
    if (absl::StatusOr<double> ms = timed_step(); !ms.ok()) return ms.status();
  }
  std::vector<double> stalls, cpu_stalls, applies, steps, prepares;
  for (int version = 1; version <= 3; ++version) {
    // A fresh staging copy laid out as WeightSyncGroup::Receive hands it to ReceiveWeights (fp32
    // views of one large buffer), prepared on another thread meanwhile.
    int64_t total = 0;
    for (const auto& [name, tensor] : fresh) total += tensor.numel();
    torch::Tensor flat = AllocateLargeBuffer(total, torch::kFloat32);
    TensorMap staged;
    int64_t offset = 0;
    for (const auto& [name, tensor] : fresh) {
      staged[name] = flat.narrow(0, offset, tensor.numel()).view(tensor.sizes());
      staged[name].copy_(tensor.detach());
      offset += tensor.numel();
    }
    flat.reset();
    double prepare_ms = 0;
    std::future<absl::StatusOr<generator::Engine::PreparedWeights>> preparing =
        std::async(std::launch::async, [&engine, &staged, &prepare_ms, version] {
          const Clock::time_point start = Clock::now();
          auto prepared = engine.PrepareWeights(std::move(staged), version);
          prepare_ms = Seconds(start) * 1e3;
          return prepared;
        });
    while (preparing.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      if (absl::StatusOr<double> ms = timed_step(); !ms.ok()) return ms.status();
    }
    absl::StatusOr<generator::Engine::PreparedWeights> prepared = preparing.get();
    if (!prepared.ok()) return prepared.status();
    std::vector<double> normal, normal_cpu;
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<double> ms = timed_step();
      if (!ms.ok()) return ms.status();
      normal.push_back(*ms);
      normal_cpu.push_back(last_step_cpu_ms);
    }
    if (absl::Status s = keep_busy(); !s.ok()) return s;
    const Clock::time_point start = Clock::now();
    const double cpu_start = ThreadCpuMs();
    absl::StatusOr<Transformer::ReleasedWeights> released =
        engine.ApplyPreparedWeights(*std::move(prepared));
    if (!released.ok()) return released.status();
    const double apply_ms = Seconds(start) * 1e3;
    if (absl::StatusOr<std::vector<generator::SampleOutput>> out = engine.Step(); !out.ok()) {
      return out.status();
    }
    const double swap_step_ms = Seconds(start) * 1e3;
    const double swap_step_cpu_ms = ThreadCpuMs() - cpu_start;
    released->tensors.clear();  // the old weights go away off the engine's clock, as in the loop
    // (whatever else ReleasedWeights holds goes with `released` at the end of this iteration)
    const double step_ms = Median(normal);
    std::fprintf(
        stderr,
        "    swap %s v%d: apply %.2f ms, swap step %.1f ms (cpu %.1f), normal step %.1f ms "
        "(cpu %.1f)\n",
        NumericModeName(mode), version, apply_ms, swap_step_ms, swap_step_cpu_ms, step_ms,
        Median(normal_cpu));
    stalls.push_back(std::max(0.0, swap_step_ms - step_ms));
    cpu_stalls.push_back(std::max(0.0, swap_step_cpu_ms - Median(normal_cpu)));
    applies.push_back(apply_ms);
    steps.push_back(step_ms);
    prepares.push_back(prepare_ms);
    if (engine.weight_version() != version) return absl::InternalError("swap not applied");
  }
  return SwapFigures{Median(stalls), Median(cpu_stalls), Median(applies), Median(steps),
                     Median(prepares)};
}

int Main(int argc, char** argv) {
  CLI::App app{"weight-sync benchmark"};
  std::string json_path;
  int iterations = 2;
  bool skip_large = false;
  int64_t bucket_bytes = int64_t{256} << 20;
  // Peer (receiver) mode.
  bool peer = false;
  GroupOptions peer_options;
  std::string manifest_path;
  std::string peer_transport = "auto";
  app.add_option("--json", json_path, "Write results as JSON here");
  app.add_option("--iterations", iterations, "Timed broadcasts per case (after one warm-up)");
  app.add_option("--bucket_bytes", bucket_bytes, "Bucket size")->capture_default_str();
  app.add_flag("--skip-large", skip_large, "Only the base preset");
  bool skip_swap = false;
  app.add_flag("--skip-swap", skip_swap, "Skip the hot-swap stall measurement");
  app.add_flag("--peer", peer)->group("");
  app.add_option("--port", peer_options.store_port)->group("");
  app.add_option("--rank", peer_options.rank)->group("");
  app.add_option("--world_size", peer_options.world_size)->group("");
  app.add_option("--group", peer_options.group_name)->group("");
  app.add_option("--manifest", manifest_path)->group("");
  app.add_option("--transport", peer_transport)->group("");
  CLI11_PARSE(app, argc, argv);
  if (peer) {
    peer_options.bucket_bytes = bucket_bytes;
    peer_options.timeout = std::chrono::milliseconds(120000);
    absl::StatusOr<Transport> transport = ParseTransport(peer_transport);
    if (!transport.ok()) return 3;
    peer_options.transport = *transport;
    return RunPeer(peer_options, manifest_path, iterations);
  }

  SetComputeThreads(1);  // one engine thread; keeps Debian's OpenBLAS from spinning a pool
  nlohmann::json json = {{"bucket_bytes", bucket_bytes}, {"iterations", iterations}};
  std::printf(
      "bench_weight_sync: one host, transports auto (default) and gloo (loopback TCP), bucket "
      "%lld MiB, median of %d\n",
      static_cast<long long>(bucket_bytes >> 20), iterations);
  std::printf("  %-16s %9s %-9s %8s %8s %9s %10s %9s %8s %9s\n", "set", "receivers", "transport",
              "MB", "buckets", "sync s", "sync GB/s", "memcpy s", "ratio", "cpu0 s");
  // Headlines per (transport asked for, receivers): the worst set.
  struct Headline {
    double gbps = 1e30;
    double ratio = 0;
  };
  std::map<std::pair<Transport, int>, Headline> headlines;
  std::string default_transport;
  std::vector<std::pair<std::string, Manifest>> sets = {{"base", BaseManifest()}};
  if (!skip_large) sets.push_back({"synthetic_500m", LargeManifest()});
  for (const auto& [set, manifest] : sets) {
    TensorMap params = FilledParams(manifest);
    const int64_t bytes = manifest.num_elements() * 4;
    const double memcpy_seconds = MemcpySeconds(params, bytes, iterations);
    for (int receivers : {1, 2}) {
      for (Transport transport : {Transport::kAuto, Transport::kGloo}) {
        absl::StatusOr<SyncFigures> sync =
            MeasureSync(set, manifest, params, receivers, iterations, bucket_bytes, transport);
        if (!sync.ok()) {
          std::fprintf(stderr, "%s x%d (%s): %s\n", set.c_str(), receivers,
                       TransportName(transport), sync.status().ToString().c_str());
          return 1;
        }
        const double gbps = bytes / sync->seconds / 1e9;
        const double ratio = sync->seconds / memcpy_seconds;
        const std::string used = TransportName(sync->transport);
        if (transport == Transport::kAuto) default_transport = used;
        const std::string label =
            transport == Transport::kAuto ? "auto:" + used : std::string(used);
        std::printf("  %-16s %9d %-9s %8.1f %8lld %9.3f %10.2f %9.3f %8.2f %9.3f\n", set.c_str(),
                    receivers, label.c_str(), bytes / 1e6,
                    static_cast<long long>(sync->num_buckets), sync->seconds, gbps, memcpy_seconds,
                    ratio, sync->sender_cpu_seconds);
        json["cases"].push_back({{"set", set},
                                 {"parameters", manifest.num_elements()},
                                 {"bytes", bytes},
                                 {"receivers", receivers},
                                 {"transport_requested", TransportName(transport)},
                                 {"transport", used},
                                 {"buckets", sync->num_buckets},
                                 {"sync_seconds", sync->seconds},
                                 {"sync_gbps", gbps},
                                 {"memcpy_seconds", memcpy_seconds},
                                 {"memcpy_gbps", bytes / memcpy_seconds / 1e9},
                                 {"sync_vs_memcpy", ratio},
                                 {"sender_cpu_seconds", sync->sender_cpu_seconds}});
        Headline& headline = headlines[{transport, receivers}];
        headline.gbps = std::min(headline.gbps, gbps);
        headline.ratio = std::max(headline.ratio, ratio);
      }
    }
  }
  // Headlines: the worst set per transport and receiver count.
  json["transport"] = default_transport;
  for (const auto& [key, headline] : headlines) {
    const std::string suffix =
        absl::StrCat(key.first == Transport::kGloo ? "_gloo" : "", key.second == 2 ? "_2recv" : "");
    json["sync_gbps" + suffix] = headline.gbps;
    json["sync_vs_memcpy" + suffix] = headline.ratio;
  }
  double worst_stall_ms = 0;
  for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    if (skip_swap) break;
    const std::string name = NumericModeName(mode);
    absl::StatusOr<SwapFigures> swap = MeasureSwapStall(mode);
    if (!swap.ok()) {
      std::fprintf(stderr, "swap stall (%s): %s\n", name.c_str(), swap.status().ToString().c_str());
      return 1;
    }
    json["swap"][name] = {{"stall_ms", swap->stall_ms},
                          {"stall_cpu_ms", swap->stall_cpu_ms},
                          {"apply_ms", swap->apply_ms},
                          {"step_ms", swap->step_ms},
                          {"prepare_ms", swap->prepare_ms}};
    std::printf(
        "  swap (base preset, %s): stall %.1f ms, %.1f ms engine CPU (pointer swap %.2f ms; decode "
        "step %.1f ms; prepared off the engine thread in %.0f ms)\n",
        name.c_str(), swap->stall_ms, swap->stall_cpu_ms, swap->apply_ms, swap->step_ms,
        swap->prepare_ms);
    worst_stall_ms = std::max(worst_stall_ms, swap->stall_ms);
  }
  // Headline: the worse mode.
  if (!skip_swap) json["swap_pause_ms"] = worst_stall_ms;
  for (int receivers : {1, 2}) {
    const Headline& shared = headlines[{Transport::kAuto, receivers}];
    const Headline& gloo = headlines[{Transport::kGloo, receivers}];
    std::printf(
        "  worst %d-receiver case: default (%s) %.2f GB/s, sync/memcpy %.2f; gloo %.2f GB/s, "
        "sync/memcpy %.2f%s\n",
        receivers, default_transport.c_str(), shared.gbps, shared.ratio, gloo.gbps, gloo.ratio,
        receivers == 1 ? " (target <= 3)" : "");
  }
  if (!skip_swap) {
    std::printf("  swap pause (base preset, worse mode): %.1f ms (target <= 50)\n", worst_stall_ms);
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::weight_sync

int main(int argc, char** argv) { return lockstep::weight_sync::Main(argc, argv); }
