// Batch-invariant linear on the CPU (fp32): y = x W^T (+ b).
//
// Contract: every output element y[m, n] is computed by one thread in one fixed order that
// depends only on K: 16 FMA chains, chain l summing x[m, k] * W[n, k] over k = l, l + 16,
// l + 32, ... (k past K reads 0), then the chains added in a fixed tree (see linear_cpu.cc), then
// + b[n]. Never on M, the tiling, the tile range a call is given, the micro-kernel family or the
// thread count: a row's result is the same bits whether it is computed alone (M = 1) or inside
// any batch. K is never split across threads.
//
// W is read in place ([N, K] row-major, as the model stores it): no packed copy of the weights
// exists, so a process holds its weights once and a weight update (an optimizer step, a weight
// sync's memcpy into the parameters) needs no repacking and no cache invalidation.
//
// Raw pointers only, no LibTorch include. Threading is the caller's: it splits the work into
// tiles with NumLinearTiles() and runs LinearTiles() on disjoint tile ranges, in any order, or
// LinearClaimedTiles() on each thread of a team sharing one TileClaims (tile_claims_cpu.h).
#ifndef LOCKSTEP_MODEL_KERNELS_LINEAR_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_LINEAR_CPU_H_

#include <cstdint>
#include <string>

namespace lockstep::kernels {

class TileClaims;

struct LinearProblem {
  const float* x = nullptr;       // [M, K] row-major, row stride x_stride (>= K)
  int64_t x_stride = 0;
  int64_t rows = 0;               // M
  const float* weight = nullptr;  // [N, K] row-major, contiguous
  int64_t out_features = 0;       // N
  int64_t in_features = 0;        // K
  const float* bias = nullptr;    // [N] or nullptr
  float* y = nullptr;             // [M, N] row-major, row stride y_stride (>= N)
  int64_t y_stride = 0;
};

// Number of independent output tiles of `problem` (depends on M and N only).
int64_t NumLinearTiles(const LinearProblem& problem);

// Computes tiles [tile_begin, tile_end). Distinct tiles write disjoint outputs.
void LinearTiles(const LinearProblem& problem, int64_t tile_begin, int64_t tile_end);

// Computes the tiles that claims->Next(part) hands out until it returns -1: the thread's part of
// a team that shares `claims` (made for NumLinearTiles(problem) tiles) computes every tile once.
void LinearClaimedTiles(const LinearProblem& problem, TileClaims* claims, int part);

// Several problems as one team's work: one parallel region where a caller would otherwise start
// one per problem (q, k and v of one x at decode; gate and up). Tiles are numbered problem by
// problem, each problem's as NumLinearTiles numbers them, so a problem's outputs are the bits it
// gets alone. `problems` points at `count` >= 0 problems, which may share x but not y.
int64_t NumLinearTiles(const LinearProblem* problems, int count);
void LinearClaimedTiles(const LinearProblem* problems, int count, TileClaims* claims, int part);

// Name of the micro-kernel family picked for this CPU ("avx512", "avx2", "portable"), for
// benchmarks.
const char* LinearKernelName();

// Cache-derived blocking: x_chunk_bytes (packed rows of x per K chunk, half of L1d; K is not
// cut at all where the rows of all of it take at most a third more),
// stream_chunk_bytes (the same where M is one row block and W streams from memory: a quarter of
// L2), column_block_bytes (W per column block, half of L2) and row_panel_bytes (rows of x
// that every column block passes over before the next rows, as large as L2) and stream_prefetch
// (whether one-column streaming tiles, decode at 1-2 rows, prefetch W ahead in software or leave
// it to the hardware prefetchers: on unless set off, for benchmarks) and stream_prefetch_nta
// (whether streaming tiles prefetch W non-temporally, prefetchnta, or into L2, prefetcht1: NTA
// on AMD family 1Ah (Zen 5) and later, where it was measured faster, T1 elsewhere) and
// stream_narrow_tiles (whether streaming tiles of 7-8 rows take 3 columns, 24 accumulators, or 4,
// 32 accumulators of which some live on the stack: 3 on AMD family 1Ah and later, where it was
// measured faster, 4 elsewhere) and stream_l1_chunks (whether streaming tiles of several columns
// whose x rows outgrow L1, more than twice x_chunk_bytes, cut K into x_chunk_bytes chunks as the
// in-cache tiles do, or keep to stream_chunk_bytes: on). None of it changes any bits.
struct LinearBlocking {
  int64_t l1_bytes = 32 << 10;  // as the CPU reports them (these defaults if it does not)
  int64_t l2_bytes = 1 << 20;
  int64_t x_chunk_bytes = 0;
  int64_t stream_chunk_bytes = 0;
  int64_t column_block_bytes = 0;
  int64_t row_panel_bytes = 0;
  int stream_prefetch = -1;      // 1 on, 0 off
  int stream_prefetch_nta = -1;  // 1 prefetchnta, 0 prefetcht1
  int stream_narrow_tiles = -1;  // 1 the ISA's narrow streaming tiles, 0 its wide ones
  int stream_l1_chunks = -1;     // 1 L1-sized K chunks where x outgrows L1, 0 stream chunks
};
LinearBlocking CurrentLinearBlocking();
// For tests and benchmarks: sets x_chunk_bytes, stream_chunk_bytes, column_block_bytes and
// row_panel_bytes (<= 0: the detected value), and stream_prefetch, stream_prefetch_nta,
// stream_narrow_tiles and stream_l1_chunks (< 0: the detected choice).
// Not to be called while a linear runs;
// NumLinearTiles may change with column_block_bytes.
void SetLinearBlocking(const LinearBlocking& blocking);

// Micro-kernel families. All compute the same chain, hence the same bits; kAuto is the best
// family this CPU runs (the one LinearTiles uses).
enum class LinearKernel { kAuto, kAvx512, kAvx2, kPortable };

// The family, its register tiles and the blocking in use, e.g. "avx512 8x3 tile (streaming 8x3),
// x chunk 16 KiB, W column block 256 KiB, x row panel 1024 KiB (L1d 32 KiB, L2 1024 KiB)", for
// benchmarks: of `kernel`'s family (kAuto, or a family this CPU cannot run: the one LinearTiles
// uses).
std::string LinearKernelDescription(LinearKernel kernel = LinearKernel::kAuto);

// LinearTiles with a chosen micro-kernel family, for tests and benchmarks. Returns false, and
// computes nothing, when this CPU cannot run `kernel`.
bool LinearTilesWithKernel(LinearKernel kernel, const LinearProblem& problem, int64_t tile_begin,
                           int64_t tile_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_CPU_H_
