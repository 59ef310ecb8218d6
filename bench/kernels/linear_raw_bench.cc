// bench_linear_raw: the batch-invariant CPU linear (lockstep_kernels_cpu)
// against OpenBLAS sgemm, y[M,N] = x[M,K] W[N,K]^T, fp32, no bias, 1 and 2
// threads, GFLOP/s side by side.
//
//   bench_linear_raw [--json FILE] [--seconds S] [--only SHAPE_NAME] [--kernel
//   avx512|avx2|portable] [--row-panel-kib KIB] [--column-block-kib KIB]
//
// Shapes: square and the base preset's at M = 1, 8, 64, 512 (decode, prefill), and "train.*",
// the base preset's at M = 4096 (one training micro-batch; x of 12-32 MiB, past L2).
//
// Ours runs tiles [0, T) on the calling thread, or [0, T/2) and [T/2, T) on it
// and one worker (a persistent spinning thread, like at::parallel_for's pool).
// OpenBLAS runs cblas_sgemm with openblas_set_num_threads(1 or 2), with
// whatever OPENBLAS_CORETYPE the environment sets. Each figure is the best ~1
// ms round (per-call time) over phases that alternate ours and OpenBLAS.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "model/kernels/linear_cpu.h"

extern "C" {
// From OpenBLAS (declared here: the system cblas.h may be the netlib one).
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc);
void openblas_set_num_threads(int num_threads);
char* openblas_get_corename(void);
}

namespace {

using lockstep::kernels::LinearProblem;
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using Clock = std::chrono::steady_clock;

// One extra thread that runs a job whenever `generation` moves; the caller runs
// its own share.
class SpinWorker {
 public:
  SpinWorker() : thread_([this] { Loop(); }) {}
  ~SpinWorker() {
    quit_.store(true);
    generation_.fetch_add(1);
    thread_.join();
  }
  // Runs `mine` here and `theirs` on the worker; returns when both are done.
  void Run(const std::function<void()>& mine,
           const std::function<void()>& theirs) {
    job_ = &theirs;
    done_.store(false, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    mine();
    for (int spins = 0; !done_.load(std::memory_order_acquire); ++spins)
      Pause(spins);
  }

 private:
  // Spin briefly, then yield: the cores are shared, and a spinner must not
  // starve the thread it waits for.
  static void Pause(int spins) {
    if (spins < 2000) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      uint64_t now;
      for (int spins = 0;
           (now = generation_.load(std::memory_order_acquire)) == seen; ++spins)
        Pause(spins);
      seen = now;
      if (quit_.load()) return;
      (*job_)();
      done_.store(true, std::memory_order_release);
    }
  }
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> done_{true};
  std::atomic<bool> quit_{false};
  const std::function<void()>* job_ = nullptr;
  std::thread thread_;
};

// Seconds per call: the best round of a phase lasting ~`phase_seconds`, each
// round being ~1 ms of back-to-back calls (at least one). The cores are shared
// with other jobs: short rounds and the minimum pick the moments the benchmark
// had its cores to itself.
double BestTime(const std::function<void()>& call, double phase_seconds) {
  call();  // warm-up
  double best = 1e30;
  const auto phase_start = Clock::now();
  do {
    int64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0.0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < 1e-3);
    best = std::min(best, elapsed / static_cast<double>(calls));
  } while (std::chrono::duration<double>(Clock::now() - phase_start).count() <
           phase_seconds);
  return best;
}

struct Shape {
  const char* name;
  int64_t m, k, n;
};

struct Result {
  Shape shape;
  double ours1, blas1, ours2, blas2;  // GFLOP/s
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  double seconds = 0.6;  // per shape and variant
  std::string only;
  lockstep::kernels::LinearKernel kernel =
      lockstep::kernels::LinearKernel::kAuto;
  std::string kernel_name = lockstep::kernels::LinearKernelName();
  CLI::App app{"bench_linear_raw: our linear micro-kernel against OpenBLAS cblas_sgemm"};
  app.add_option("--json", json_path, "Write the figures as JSON");
  app.add_option("--seconds", seconds, "Seconds per shape and variant")->capture_default_str();
  app.add_option("--only", only, "Only the shape of this name");
  int64_t row_panel_kib = 0;
  app.add_option("--row-panel-kib", row_panel_kib,
                 "Rows of x per row panel, in KiB (0 = the detected blocking)");
  int64_t column_block_kib = 0;
  app.add_option("--column-block-kib", column_block_kib,
                 "Weights per column block, in KiB (0 = the detected blocking)");
  int64_t x_chunk_kib = 0;
  app.add_option("--x-chunk-kib", x_chunk_kib,
                 "Packed rows of x per K chunk of the in-cache tiles, in KiB (0 = the detected "
                 "blocking)");
  CLI::Option* kernel_flag =
      app.add_option("--kernel", kernel_name, "Micro-kernel (default: the CPU's best)")
          ->check(CLI::IsMember({"avx512", "avx2", "portable"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  lockstep::kernels::LinearBlocking blocking;
  blocking.row_panel_bytes = row_panel_kib << 10;
  blocking.column_block_bytes = column_block_kib << 10;
  blocking.x_chunk_bytes = x_chunk_kib << 10;
  lockstep::kernels::SetLinearBlocking(blocking);
  if (kernel_flag->count() > 0) {
    using lockstep::kernels::LinearKernel;
    kernel = kernel_name == "avx512" ? LinearKernel::kAvx512
             : kernel_name == "avx2" ? LinearKernel::kAvx2
                                     : LinearKernel::kPortable;
  }
  std::printf("blocking: %s\n", lockstep::kernels::LinearKernelDescription(kernel).c_str());
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf(
      "ours: %s micro-kernel | OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n",
      kernel_name.c_str(), openblas_get_corename(),
      coretype != nullptr ? coretype : "<unset>");

  std::vector<Shape> shapes;
  for (int64_t m : {1, 8, 64, 512}) shapes.push_back({"square", m, 1024, 1024});
  for (int64_t m : {1, 8, 64, 512}) {
    shapes.push_back({"base.q/o", m, 768, 768});
    shapes.push_back({"base.kv", m, 768, 256});
    shapes.push_back({"base.up", m, 768, 2048});
    shapes.push_back({"base.down", m, 2048, 768});
    shapes.push_back({"base.lm", m, 768, 32000});
  }
  for (const char* name : {"train.q/o", "train.up", "train.down"}) {
    const std::string family = name;
    shapes.push_back({name, 4096, family == "train.down" ? 2048 : 768,
                      family == "train.up" ? 2048 : 768});
  }

  std::printf("%-10s %5s %5s %6s | %9s %9s %6s | %9s %9s %6s\n", "shape", "M",
              "K", "N", "ours1t", "blas1t", "ratio", "ours2t", "blas2t",
              "ratio");
  std::vector<Result> results;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Shape& s : shapes) {
    if (!only.empty() && only != s.name) continue;
    std::vector<float> x(s.m * s.k), w(s.n * s.k), y_ours(s.m * s.n),
        y_blas(s.m * s.n);
    for (float& v : x) v = normal(rng);
    for (float& v : w) v = normal(rng) / std::sqrt(static_cast<float>(s.k));
    LinearProblem p;
    p.x = x.data();
    p.x_stride = s.k;
    p.rows = s.m;
    p.weight = w.data();
    p.out_features = s.n;
    p.in_features = s.k;
    p.y = y_ours.data();
    p.y_stride = s.n;
    const int64_t tiles = lockstep::kernels::NumLinearTiles(p);

    const auto run_tiles = [&](int64_t begin, int64_t end) {
      if (!lockstep::kernels::LinearTilesWithKernel(kernel, p, begin, end)) {
        std::fprintf(stderr, "this CPU cannot run the %s kernel\n",
                     kernel_name.c_str());
        std::exit(2);
      }
    };
    const auto ours1 = [&] { run_tiles(0, tiles); };
    const auto blas = [&] {
      cblas_sgemm(kRowMajor, kNoTrans, kTrans, s.m, s.n, s.k, 1.0f, x.data(),
                  s.k, w.data(), s.k, 0.0f, y_blas.data(), s.n);
    };
    const std::function<void()> first_half = [&] { run_tiles(0, tiles / 2); };
    const std::function<void()> second_half = [&] {
      run_tiles(tiles / 2, tiles);
    };

    const double flops = 2.0 * s.m * s.k * s.n;
    // Phases alternate ours / OpenBLAS so that both see the same machine load.
    const int phases = 3;
    double t_ours1 = 1e30, t_blas1 = 1e30, t_ours2 = 1e30, t_blas2 = 1e30;
    openblas_set_num_threads(1);
    for (int r = 0; r < phases; ++r) {
      t_ours1 = std::min(t_ours1, BestTime(ours1, seconds / phases));
      t_blas1 = std::min(t_blas1, BestTime(blas, seconds / phases));
    }
    // Sanity: both compute the same product (to fp32 summation-order noise).
    double max_diff = 0.0;
    for (size_t i = 0; i < y_ours.size(); ++i)
      max_diff = std::max(max_diff, double(std::fabs(y_ours[i] - y_blas[i])));
    if (max_diff > 1e-3)
      std::fprintf(stderr, "WARNING: ours and OpenBLAS differ by %g\n",
                   max_diff);

    for (int r = 0; r < phases; ++r) {
      {
        SpinWorker worker;  // alive (spinning) only during our phase
        t_ours2 = std::min(
            t_ours2, BestTime([&] { worker.Run(first_half, second_half); },
                              seconds / phases));
      }
      openblas_set_num_threads(2);
      t_blas2 = std::min(t_blas2, BestTime(blas, seconds / phases));
      openblas_set_num_threads(1);
    }
    Result res{s,
               flops / t_ours1 * 1e-9,
               flops / t_blas1 * 1e-9,
               flops / t_ours2 * 1e-9,
               flops / t_blas2 * 1e-9};
    results.push_back(res);
    std::printf(
        "%-10s %5ld %5ld %6ld | %9.1f %9.1f %6.2f | %9.1f %9.1f %6.2f\n",
        s.name, s.m, s.k, s.n, res.ours1, res.blas1, res.ours1 / res.blas1,
        res.ours2, res.blas2, res.ours2 / res.blas2);
    std::fflush(stdout);
  }

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::perror(json_path.c_str());
      return 1;
    }
    std::fprintf(
        f, "{\"kernel\": \"%s\", \"openblas_core\": \"%s\", \"results\": [\n",
        kernel_name.c_str(), openblas_get_corename());
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f,
                   "  {\"shape\": \"%s\", \"m\": %ld, \"k\": %ld, \"n\": %ld, "
                   "\"ours_1t_gflops\": %.2f, "
                   "\"blas_1t_gflops\": %.2f, \"ours_2t_gflops\": %.2f, "
                   "\"blas_2t_gflops\": %.2f}%s\n",
                   r.shape.name, r.shape.m, r.shape.k, r.shape.n, r.ours1,
                   r.blas1, r.ours2, r.blas2,
                   i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
