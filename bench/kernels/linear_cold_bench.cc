// bench_linear_cold: the batch-invariant linear at decode sizes with weights that come from
// memory, as in a decode step, next to a read of the same bytes, at 1 and 2 threads.
//
//   bench_linear_cold [--rows 8] [--rounds 5] [--small-pages] [--simd avx2] [--json FILE]
//
// (--simd: the linear family of a narrower CPU, bench/simd_flag.h.)
//
// The weights are the matrices of one decode step of the base preset (Qwen3, hidden 768,
// intermediate 2048, 12 layers, 32000-token tied head: 382 MiB, far beyond the last-level
// cache), in one buffer, laid out in the order a forward reads them. A sweep runs every matrix
// once on x of --rows rows; each matrix's tiles are shared by the threads as the model's linear
// shares them (TileClaims: a contiguous range each, the last tiles taken by whoever is free).
// Each round times one sweep and a read (the memory floor: the faster of a plain and a
// prefetching read, stream_read.h; until 2026-12-07 the plain one alone) back to back, so both
// see the same moment's bandwidth; the figures are the best round.
// `linear_vs_stream_tT` is the sweep's rate over the read's: 1.0 would be a kernel at the
// memory floor. Per family (attention, MLP in, down projection with K = 2048, LM head) the
// sweep's rate is reported too (`<family>_gbps_tT`). Each round also times the sweep with the
// one-column streaming tiles' software prefetch (LinearBlocking::stream_prefetch, 1-2 rows) on
// and off, whatever this CPU's detected choice: `linear_vs_stream_prefetch_{on,off}_tT`, with
// the streaming tiles' prefetch hint (LinearBlocking::stream_prefetch_nta) T1 and NTA:
// `linear_vs_stream_hint_{t1,nta}_tT`, with the wide and narrow streaming tiles
// (LinearBlocking::stream_narrow_tiles, 7-8 rows): `linear_vs_stream_{wide,narrow}_tiles_tT`,
// with x of the tiles that outgrow L1 (the down projection at 8 rows) in stream-sized and
// L1-sized K chunks (LinearBlocking::stream_l1_chunks): `linear_vs_stream_{stream,l1}_chunks_tT`,
// with each thread held to its static share of the tiles: `static_split_vs_stream_tT`, and with
// the whole sweep as one parallel region whose threads meet at a spinning barrier after each
// matrix, instead of a region per matrix: `one_region_vs_stream_tT` (what running a decode
// step's linears in one region would gain; the model starts a region per call).
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/kernels/stream_read.h"
#include "bench/simd_flag.h"
#include "model/kernels/linear_cpu.h"
#include "model/kernels/tile_claims_cpu.h"
#include "nlohmann/json.hpp"

namespace lockstep::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Matrix {
  std::string family;
  int64_t out_features, in_features;
  int64_t offset = 0;  // floats into the weight buffer
};

// One decode step's matrices of the base preset, in forward order.
std::vector<Matrix> BaseDecodeMatrices() {
  constexpr int64_t kHidden = 768, kKv = 256, kIntermediate = 2048, kVocab = 32000, kLayers = 12;
  std::vector<Matrix> matrices;
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    for (int64_t n : {kHidden, kKv, kKv, kHidden}) matrices.push_back({"attention", n, kHidden});
    matrices.push_back({"mlp_in", kIntermediate, kHidden});
    matrices.push_back({"mlp_in", kIntermediate, kHidden});
    matrices.push_back({"down", kHidden, kIntermediate});
  }
  matrices.push_back({"lm_head", kVocab, kHidden});
  int64_t offset = 0;
  for (Matrix& m : matrices) {
    m.offset = offset;
    offset += m.out_features * m.in_features;
  }
  return matrices;
}

// Runs part(t) for t in [0, threads) on an OpenMP team: a persistent pool, as
// at::parallel_for's, so that small matrices do not pay for starting threads.
void OnThreads(int threads, const std::function<void(int)>& part) {
#pragma omp parallel num_threads(threads)
  part(omp_get_thread_num());
}

// The weights: 2 MiB-aligned and advised onto transparent huge pages, as the model places its
// parameters (model/huge_pages.h), unless `small_pages`: on some VMs the page walks over 4 KiB
// pages cost a decode sweep as much as a tenth of its time (the Sapphire-Rapids-class guest,
// huge_pages.h); on the AMD EPYC Zen 5 guest of 2026-12-06 the two placements ran alike.
class WeightBuffer {
 public:
  WeightBuffer(int64_t count, bool small_pages) : count_(count) {
    constexpr int64_t kHuge = int64_t{2} << 20;
    const int64_t bytes = (count * int64_t{sizeof(float)} + kHuge - 1) / kHuge * kHuge;
    data_ = static_cast<float*>(std::aligned_alloc(kHuge, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    if (!small_pages) huge_ = madvise(data_, bytes, MADV_HUGEPAGE) == 0;
  }
  ~WeightBuffer() { std::free(data_); }
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;
  float* data() const { return data_; }
  int64_t size() const { return count_; }
  bool huge() const { return huge_; }

 private:
  float* data_ = nullptr;
  int64_t count_;
  bool huge_ = false;
};

struct Buffers {
  explicit Buffers(int64_t weight_count, bool small_pages) : weights(weight_count, small_pages) {}
  WeightBuffer weights;
  std::vector<float> x, y;
};

// Matrix m on x of `rows` rows (b's x and y, m's weights).
kernels::LinearProblem ProblemOf(Buffers* b, const Matrix& m, int64_t rows) {
  kernels::LinearProblem p;
  p.x = b->x.data();
  p.x_stride = m.in_features;
  p.rows = rows;
  p.weight = b->weights.data() + m.offset;
  p.out_features = m.out_features;
  p.in_features = m.in_features;
  p.y = b->y.data();
  p.y_stride = m.out_features;
  return p;
}

// Seconds for one sweep over `matrices` (all of them, or those of `family`) on `threads`;
// `static_split`: each thread computes exactly its contiguous range (no TileClaims), as the
// model's linear did before the claims.
double Sweep(Buffers* b, const std::vector<Matrix>& matrices, int64_t rows, int threads,
             const std::string& family, bool static_split = false) {
  const auto start = Clock::now();
  for (const Matrix& m : matrices) {
    if (!family.empty() && m.family != family) continue;
    const kernels::LinearProblem p = ProblemOf(b, m, rows);
    const int64_t tiles = kernels::NumLinearTiles(p);
    if (static_split) {
      OnThreads(threads, [&](int t) {
        kernels::LinearTiles(p, tiles * t / threads, tiles * (t + 1) / threads);
      });
      continue;
    }
    kernels::TileClaims claims(tiles, threads);
    OnThreads(threads, [&](int t) { kernels::LinearClaimedTiles(p, &claims, t); });
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A barrier for the threads of one OpenMP region that spins on an atomic word (no system call):
// what a decode step run as one region would pay between two linears instead of a region's
// start and end (libgomp wakes its team with a futex at both, spinning workers or not).
class SpinBarrier {
 public:
  explicit SpinBarrier(int threads) : threads_(threads) {}
  void Wait() {
    const int generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(generation + 1, std::memory_order_release);
      return;
    }
    while (generation_.load(std::memory_order_acquire) == generation) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }

 private:
  const int threads_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

// Seconds for one sweep as Sweep's with every matrix in one OpenMP region, the threads meeting
// at a SpinBarrier after each matrix instead of starting and ending a region per matrix.
double SweepInOneRegion(Buffers* b, const std::vector<Matrix>& matrices, int64_t rows,
                        int threads) {
  std::vector<kernels::LinearProblem> problems;
  std::vector<std::unique_ptr<kernels::TileClaims>> claims;
  for (const Matrix& m : matrices) {
    problems.push_back(ProblemOf(b, m, rows));
    claims.push_back(
        std::make_unique<kernels::TileClaims>(kernels::NumLinearTiles(problems.back()), threads));
  }
  SpinBarrier barrier(threads);
  const auto start = Clock::now();
  OnThreads(threads, [&](int t) {
    for (size_t i = 0; i < problems.size(); ++i) {
      kernels::LinearClaimedTiles(problems[i], claims[i].get(), t);
      barrier.Wait();
    }
  });
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds to read the whole weight buffer once, each thread an equal contiguous share: the
// faster of a plain and a prefetching read (stream_read.h).
double Stream(const Buffers& b, int threads, std::vector<float>* sums) {
  const std::vector<FloatSpan> spans = {{b.weights.data(), static_cast<int64_t>(b.weights.size())}};
  double best = 1e30;
  for (StreamReadForm form : {StreamReadForm::kPlain, StreamReadForm::kPrefetching}) {
    const auto start = Clock::now();
    OnThreads(threads, [&](int t) { (*sums)[t] += StreamReadShare(spans, t, threads, form); });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep::bench;
  CLI::App app{"Batch-invariant linear at decode sizes with cold weights, next to a read"};
  int64_t rows = 8;
  int rounds = 5;
  std::string json_path;
  app.add_option("--rows", rows, "Rows of x (the decode batch)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds per thread count (best is kept)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--json", json_path, "Write the figures here");
  bool small_pages = false;
  app.add_flag("--small-pages", small_pages,
               "Leave the weights on 4 KiB pages (default: advised onto 2 MiB pages, as the "
               "model's)");
  std::string simd = "auto";
  AddSimdOption(app, &simd);
  CLI11_PARSE(app, argc, argv);
  if (!ApplySimdLevel(simd)) return 2;

  const std::vector<Matrix> matrices = BaseDecodeMatrices();
  const Matrix& last = matrices.back();
  Buffers b(last.offset + last.out_features * last.in_features, small_pages);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-0.05f, 0.05f);
  for (int64_t i = 0; i < b.weights.size(); ++i) b.weights.data()[i] = uniform(rng);
  b.x.resize(rows * 2048);
  for (float& v : b.x) v = uniform(rng);
  b.y.resize(rows * 32000);
  const double bytes = static_cast<double>(b.weights.size()) * sizeof(float);
  std::printf(
      "bench_linear_cold: %.0f MiB of weights (base preset decode step), x of %ld rows, "
      "kernel %s, best of %d rounds, weights on %s pages, read in %d-float loads (plain or "
      "prefetching, the faster)\n",
      bytes / (1 << 20), static_cast<long>(rows), lockstep::kernels::LinearKernelName(), rounds,
      b.weights.huge() ? "2 MiB (advised)" : "4 KiB", StreamReadLanes());

  nlohmann::json json = {{"rows", rows},
                         {"weights_mib", bytes / (1 << 20)},
                         {"kernel", lockstep::kernels::LinearKernelName()},
                         {"huge_pages", b.weights.huge()},
                         {"stream_read_lanes", StreamReadLanes()}};
  const std::vector<std::string> families = {"attention", "mlp_in", "down", "lm_head"};
  std::vector<float> sums(2, 0.0f);
  using lockstep::kernels::CurrentLinearBlocking;
  using lockstep::kernels::LinearBlocking;
  using lockstep::kernels::SetLinearBlocking;
  std::printf("  %s\n", lockstep::kernels::LinearKernelDescription().c_str());
  json["kernel_description"] = lockstep::kernels::LinearKernelDescription();
  json["stream_prefetch_detected"] = CurrentLinearBlocking().stream_prefetch;
  json["stream_prefetch_nta_detected"] = CurrentLinearBlocking().stream_prefetch_nta;
  json["stream_narrow_tiles_detected"] = CurrentLinearBlocking().stream_narrow_tiles;
  json["stream_l1_chunks_detected"] = CurrentLinearBlocking().stream_l1_chunks;
  // One sweep with the one-column prefetch off / on (`prefetch`), the streaming prefetch hint
  // T1 / NTA (`nta`), the wide / narrow streaming tiles (`narrow`) or stream / L1 chunks
  // (`l1_chunks`), whatever was detected; -1 leaves a setting detected.
  const auto sweep_with = [&](int prefetch, int nta, int narrow, int l1_chunks, int threads) {
    LinearBlocking blocking;
    blocking.stream_prefetch = prefetch;
    blocking.stream_prefetch_nta = nta;
    blocking.stream_narrow_tiles = narrow;
    blocking.stream_l1_chunks = l1_chunks;
    SetLinearBlocking(blocking);
    const double seconds = Sweep(&b, matrices, rows, threads, "");
    SetLinearBlocking(LinearBlocking());  // the detected choice again
    return seconds;
  };
  for (int threads : {1, 2}) {
    double best_sweep = 1e30, best_stream = 1e30;
    double best_prefetch[2] = {1e30, 1e30};  // [off, on]
    double best_hint[2] = {1e30, 1e30};      // [T1, NTA]
    double best_tiles[2] = {1e30, 1e30};     // [wide, narrow]
    double best_chunks[2] = {1e30, 1e30};    // [stream, L1]
    double best_static = 1e30, best_one_region = 1e30;
    std::vector<double> best_family(families.size(), 1e30);
    Sweep(&b, matrices, rows, threads, "");  // warm-up: page faults, thread start-up
    for (int round = 0; round < rounds; ++round) {
      best_sweep = std::min(best_sweep, Sweep(&b, matrices, rows, threads, ""));
      best_stream = std::min(best_stream, Stream(b, threads, &sums));
      best_static = std::min(best_static, Sweep(&b, matrices, rows, threads, "", true));
      best_one_region = std::min(best_one_region, SweepInOneRegion(&b, matrices, rows, threads));
      for (int setting : {0, 1}) {
        best_prefetch[setting] =
            std::min(best_prefetch[setting], sweep_with(setting, -1, -1, -1, threads));
        best_hint[setting] = std::min(best_hint[setting], sweep_with(-1, setting, -1, -1, threads));
        best_tiles[setting] =
            std::min(best_tiles[setting], sweep_with(-1, -1, setting, -1, threads));
        best_chunks[setting] =
            std::min(best_chunks[setting], sweep_with(-1, -1, -1, setting, threads));
      }
      for (size_t f = 0; f < families.size(); ++f) {
        best_family[f] = std::min(best_family[f], Sweep(&b, matrices, rows, threads, families[f]));
      }
    }
    const std::string t = "_t" + std::to_string(threads);
    const double linear_gbps = bytes / best_sweep / 1e9, stream_gbps = bytes / best_stream / 1e9;
    json["sweep_ms" + t] = best_sweep * 1e3;
    json["linear_gbps" + t] = linear_gbps;
    json["stream_gbps" + t] = stream_gbps;
    json["linear_vs_stream" + t] = linear_gbps / stream_gbps;
    json["linear_vs_stream_prefetch_off" + t] = best_stream / best_prefetch[0];
    json["linear_vs_stream_prefetch_on" + t] = best_stream / best_prefetch[1];
    json["linear_vs_stream_hint_t1" + t] = best_stream / best_hint[0];
    json["linear_vs_stream_hint_nta" + t] = best_stream / best_hint[1];
    json["linear_vs_stream_wide_tiles" + t] = best_stream / best_tiles[0];
    json["linear_vs_stream_narrow_tiles" + t] = best_stream / best_tiles[1];
    json["linear_vs_stream_stream_chunks" + t] = best_stream / best_chunks[0];
    json["linear_vs_stream_l1_chunks" + t] = best_stream / best_chunks[1];
    json["static_split_vs_stream" + t] = best_stream / best_static;
    json["one_region_vs_stream" + t] = best_stream / best_one_region;
    std::printf(
        "  %d thread%s: sweep %.1f ms = %.2f GB/s, read %.2f GB/s, "
        "linear_vs_stream %.3f (one-column prefetch off %.3f, on %.3f; hint T1 %.3f, NTA %.3f; "
        "tiles wide %.3f, narrow %.3f; chunks stream %.3f, L1 %.3f; static split %.3f; "
        "one region %.3f)\n   ",
        threads, threads == 1 ? " " : "s", best_sweep * 1e3, linear_gbps, stream_gbps,
        linear_gbps / stream_gbps, best_stream / best_prefetch[0], best_stream / best_prefetch[1],
        best_stream / best_hint[0], best_stream / best_hint[1], best_stream / best_tiles[0],
        best_stream / best_tiles[1], best_stream / best_chunks[0], best_stream / best_chunks[1],
        best_stream / best_static, best_stream / best_one_region);
    for (size_t f = 0; f < families.size(); ++f) {
      double family_bytes = 0;
      for (const Matrix& m : matrices) {
        if (m.family == families[f]) family_bytes += m.out_features * m.in_features * 4.0;
      }
      const double gbps = family_bytes / best_family[f] / 1e9;
      json[families[f] + "_gbps" + t] = gbps;
      std::printf(" %s %.2f GB/s", families[f].c_str(), gbps);
    }
    std::printf("\n");
  }
  json["checksum"] = sums[0] + sums[1] + b.y[0];
  if (!json_path.empty()) {
    std::ofstream(json_path) << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
