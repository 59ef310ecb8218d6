// Internal to the fixed-order linear (linear_cpu.cc): the register-tile micro-kernels of each
// ISA family and what the driver needs to know about them. Not part of the kernel's API.
//
// A micro-kernel computes `rows` x `columns` outputs over one chunk of K. Every output owns 16
// lane partial sums (the 16 FMA chains of the contract, linear_cpu.h); between chunks they are
// carried through memory, exactly (a float stored and loaded is the same float), so splitting K
// into chunks inside one thread changes nothing in any chain. After the last chunk the kernel
// reduces the 16 lanes in the contract's fixed tree, adds the bias and writes y.
#ifndef LOCKSTEP_MODEL_KERNELS_LINEAR_MICROKERNEL_H_
#define LOCKSTEP_MODEL_KERNELS_LINEAR_MICROKERNEL_H_

#include <array>
#include <cstdint>
#include <utility>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "model/kernels/linear_cpu.h"

namespace lockstep::kernels::linear_internal {

constexpr int kLanes = 16;   // chains per output (one zmm, two ymm)
constexpr int kMaxRows = 8;  // rows of the largest register tile of any family
constexpr int kMaxColumns = 12;

// How far ahead of the current k a one-column streaming tile prefetches its weights (into L2),
// where LinearBlocking::stream_prefetch is on (off, the in-cache table's kernel runs instead):
// W is then one sequential stream, and the lines in flight must cover memory's latency times
// the bandwidth one core can draw. 8 KiB: at 1 KiB ahead a base-preset decode sweep at 1 row
// reached 0.67-0.80 of a plain read on AMD EPYC Zen 5 (2 threads), at 4-8 KiB 0.83-0.95
// (bench_linear_cold --rows 1). It is under 2% of the smallest L2 we have met (512 KiB, Zen 3),
// so the prefetched lines are still there when the loads arrive.
constexpr int64_t kStreamPrefetchFloats = 2048;

// How a streaming micro-kernel prefetches W (a template argument): not at all (W in cache), into
// L2 (prefetcht1), or non-temporal (prefetchnta: the line is marked as read once, which on AMD
// Zen should spare the L2 and the L3 victim cache a copy of weights nothing reads again; the
// reason is our reading, the speed measured: AMD EPYC Zen 5, base decode matrices, 2 threads,
// 8 rows 8.3-9.2 ms a sweep against 9.0-9.7 with T1, 1 row 6.5-7.2 against 7.1-8.3, alternated
// runs of bench_linear_cold, 2026-12-06).
constexpr int kPrefetchNone = 0, kPrefetchT1 = 1, kPrefetchNta = 2;

template <int kPrefetch>
inline void PrefetchW(const float* address) {
#if defined(__x86_64__)
  if constexpr (kPrefetch == kPrefetchT1) {
    _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T1);
  } else if constexpr (kPrefetch == kPrefetchNta) {
    _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_NTA);
  }
#else
  (void)address;
#endif
}

// Streaming tiles of several columns that prefetch W non-temporally also fetch each weight row's
// lines into L1 this far ahead (prefetcht0, 1 KiB): a load that misses L1 holds one of its few
// miss buffers with the tile's FMAs waiting behind it. The far prefetch has had ~12 KiB of tiles
// to land, so this one waits for the nearer caches only. AMD EPYC Zen 5, 2 threads, the base
// decode matrices at 8 rows (an out-of-tree copy of the streaming loop, variants alternated in
// one process, 2026-12-07): 8 x 4 NTA 0.61 of a plain read without it, 0.74 with it; 8 x 3 0.74
// / 0.81; at 1 thread 0.55 / 0.64 and 0.74 / 0.74; with T1 as the far hint it gained 0-7%, so
// the T1 kernels (Zen 4, Intel: not measured with it) go without. 2 KiB ahead ran slower than
// 1 KiB in one run; 512 bytes faster in one and slower in another. One-column tiles go without:
// bench_linear_cold --rows 1 (2 threads) swept in 7.7-9.0 ms with it against 5.5-6.3 without.
constexpr int64_t kL1PrefetchFloats = 256;

template <int kPrefetch>
inline void PrefetchL1(const float* address) {
#if defined(__x86_64__)
  if constexpr (kPrefetch == kPrefetchNta) {
    _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T0);
  }
#else
  (void)address;
#endif
}

struct ChunkTile {
  const float* x;    // first row of the chunk, k = chunk start; rows x_stride floats apart
  int64_t x_stride;  // a packed copy: 64-byte aligned rows
  const float* w;    // weight row of the first column at the chunk start; rows w_stride apart
  int64_t w_stride;  // K
  int64_t length;    // k in this chunk; a multiple of kLanes except in the last chunk
  // The carried lanes: output (i, j) at partial + (i * partial_stride + j) * kLanes, 64-byte
  // aligned. Read unless `first`, written unless `last`; unused when both.
  float* partial;
  int64_t partial_stride;
  bool first, last;
  const float* bias;  // bias of the first column, or nullptr (used when `last`)
  float* y;           // first row, first column (written when `last`)
  int64_t y_stride;
};

using ChunkKernel = void (*)(const ChunkTile&);
// [rows - 1][columns - 1]; every shape a tile can ask of its family is filled.
using KernelTable = std::array<std::array<ChunkKernel, kMaxColumns>, kMaxRows>;

// A micro-kernel family: its kernels and, by number of rows, the columns of its register tile.
// Column counts divide the driver's column quantum (24), so every column block splits evenly.
struct Isa {
  LinearKernel kind;
  const char* name;
  const KernelTable* table;            // W in cache (reused by several row groups)
  const KernelTable* streaming_table;  // W streamed from memory once: prefetches the next tile
  const KernelTable* streaming_nta_table;  // the same with non-temporal prefetches
  int main_rows;            // rows of the main in-cache register tile (<= kMaxRows)
  int streaming_main_rows;  // the same for the streaming tiles (decode: W from memory once)
  std::array<int, kMaxRows + 1> columns_for_rows;
  // The same for streaming_table: W comes from memory once, so a wider tile (more weight rows
  // in flight, more FMAs per x load) pays even where it leaves fewer registers spare.
  std::array<int, kMaxRows + 1> streaming_columns_for_rows;
  // The same where LinearBlocking::stream_narrow_tiles is on: no register tile wider than the
  // register file holds without spilling accumulators to the stack.
  std::array<int, kMaxRows + 1> narrow_streaming_columns_for_rows;
};

// A family's table from Family<MR, NR>::Run (nullptr where NR > Family<MR, NR>::kMaxColumns).
template <template <int, int> class Family, int MR, int... NRs>
constexpr std::array<ChunkKernel, kMaxColumns> TableRow(std::integer_sequence<int, NRs...>) {
  return {(NRs + 1 <= Family<MR, NRs + 1>::kMaxColumns ? &Family<MR, NRs + 1>::Run : nullptr)...};
}
template <template <int, int> class Family, int... MRs>
constexpr KernelTable MakeTableOf(std::integer_sequence<int, MRs...>) {
  return {TableRow<Family, MRs + 1>(std::make_integer_sequence<int, kMaxColumns>())...};
}
template <template <int, int> class Family>
constexpr KernelTable MakeTable() {
  return MakeTableOf<Family>(std::make_integer_sequence<int, kMaxRows>());
}

const Isa& PortableIsa();
#if defined(__x86_64__)
const Isa& Avx2Isa();
const Isa& Avx512Isa();
#endif

// The contract's lane tree for one output: t_l = v_l + v_{l+8}, s_l = t_l + t_{l+4} (l < 4),
// ((s0 + s2) + (s1 + s3)).
inline float ReduceLanes(const float* v) {
  float t[8];
  for (int l = 0; l < 8; ++l) t[l] = v[l] + v[l + 8];
  const float s0 = t[0] + t[4], s1 = t[1] + t[5], s2 = t[2] + t[6], s3 = t[3] + t[7];
  return (s0 + s2) + (s1 + s3);
}

}  // namespace lockstep::kernels::linear_internal

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_MICROKERNEL_H_
