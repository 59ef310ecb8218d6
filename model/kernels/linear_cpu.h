// Batch-invariant linear on the CPU (fp32): y = x W^T (+ b).
//
// Contract: every output element y[m, n] is computed by one thread as
//   acc = 0; for k = 0 .. K-1: acc = fma(x[m, k], W[n, k], acc);  y[m, n] = acc (+ b[n])
// or by another fixed order that depends only on K (never on M, the tiling, the tile range a
// call is given, or the thread count). Hence a row's result is the same bits whether it is
// computed alone (M = 1) or inside any batch. K is never split across threads.
//
// Raw pointers only, no LibTorch include. Threading is the caller's: it splits the work into
// tiles with NumLinearTiles() and runs LinearTiles() on disjoint tile ranges, in any order.
#ifndef LOCKSTEP_MODEL_KERNELS_LINEAR_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_LINEAR_CPU_H_

#include <cstdint>
#include <memory>

namespace lockstep::kernels {

// W re-laid out once per weight version for the micro-kernel (layout private to linear_cpu.cc).
struct PackedLinearWeight {
  int64_t out_features = 0;  // N
  int64_t in_features = 0;   // K
  std::shared_ptr<float> data;  // 64-byte aligned, layout chosen by PackLinearWeight
  int64_t num_floats = 0;
};

// Packs weight [N, K] row-major. Thread-safe; O(N K).
PackedLinearWeight PackLinearWeight(const float* weight, int64_t out_features,
                                    int64_t in_features);

// Packs a new version of the same-shaped weight [N, K] into `packed`'s existing storage (no
// allocation, no page faults: for per-step weight updates). The caller guarantees that nothing
// reads `packed` (or a copy sharing its data) meanwhile.
void RepackLinearWeight(const float* weight, PackedLinearWeight* packed);

struct LinearProblem {
  const float* x = nullptr;       // [M, K] row-major, row stride x_stride (>= K)
  int64_t x_stride = 0;
  int64_t rows = 0;               // M
  const PackedLinearWeight* weight = nullptr;
  const float* bias = nullptr;    // [N] or nullptr
  float* y = nullptr;             // [M, N] row-major, row stride y_stride (>= N)
  int64_t y_stride = 0;
};

// Number of independent output tiles of `problem` (depends on M and N only).
int64_t NumLinearTiles(const LinearProblem& problem);

// Computes tiles [tile_begin, tile_end). Distinct tiles write disjoint outputs.
void LinearTiles(const LinearProblem& problem, int64_t tile_begin, int64_t tile_end);

// Name of the micro-kernel picked for this CPU ("avx512", "avx2", "portable"), for benchmarks.
const char* LinearKernelName();

// Micro-kernel families. All compute the same chain, hence the same bits; kAuto is the best
// family this CPU runs (the one LinearTiles uses).
enum class LinearKernel { kAuto, kAvx512, kAvx2, kPortable };

// LinearTiles with a chosen micro-kernel family, for tests and benchmarks. Returns false, and
// computes nothing, when this CPU cannot run `kernel`.
bool LinearTilesWithKernel(LinearKernel kernel, const LinearProblem& problem, int64_t tile_begin,
                           int64_t tile_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_CPU_H_
