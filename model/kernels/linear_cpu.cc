// Fixed-order CPU linear: y = x W^T (+ b), fp32, W read in place.
//
// The fixed order (see linear_cpu.h): for output (m, n), lane l of a 16-lane accumulator sums
// x[m, k] * W[n, k] over k = l, l + 16, l + 32, ... as one FMA chain (inputs past K read as 0);
// then t_l = v_l + v_{l+8}, s_l = t_l + t_{l+4} (l < 4), and y = ((s0 + s2) + (s1 + s3)) + b[n].
// x rows and W rows are both contiguous in k, so a micro-kernel (linear_*_cpu.cc) loads 16
// consecutive k of MR rows of x and NR rows of W and FMAs every pair into MR x NR accumulators;
// no packed copy of W exists and no operand is transposed. Every ISA family and tile shape runs
// the same per-element order, so the results are bit-identical across all of them.
//
// Blocking (all of it inside one thread's tile, none of it visible in the bits):
// - Tiles are (row block x column block) units in row-block-fastest order: consecutive tiles share
//   a column block of W (about half of L2), which stays in L2 while the rows stream past.
// - Rows are grouped into row panels of x about as large as L2 (row_panel_bytes), panel by
//   panel: every column block of W passes over one panel before the next panel starts, so x
//   comes from memory once and from L2 / L3 for the other column blocks (W, a column block at a
//   time, from L3 or memory once per panel). Without panels a training-sized x (4096 x 2048
//   floats, 32 MiB) streamed from memory once per column block: its packing copies were 7% of a
//   batch-invariant training step (bench_trainer, base).
// - x is copied once per call and thread into a packed, 64-byte-aligned panel (PackedX: a row
//   block the first time a tile needs it, all of K) and read from there by every tile. Inside a
//   tile, K is cut into chunks sized so MR rows of a chunk take half of L1 (rows K * 4 bytes
//   apart alias in L1 when that is a multiple of 4 KiB, and 8 rows of K = 2048 do not fit L1 at
//   all), or kept whole when MR rows of all of K take at most two thirds of L1
//   (InCacheChunkLength); for each chunk the block's W rows stream from L2 past those rows.
// - Decode-sized M (one row block): W streams from memory once and nothing reuses it, so the
//   chunk is sized for the tile's rows in a quarter of L2 (stream_chunk_bytes), usually all of
//   K: each weight row is then one long stream, read start to end, where L1-sized chunks broke it
//   into pieces that the prefetchers started afresh (base decode matrices, 1 row, AMD Zen 4:
//   17.6 -> 15.8 ms a sweep). The register tile is the ISA's streaming one. Where the tile's
//   rows of all of K outgrow L1 and it reads several weight rows at once, K is cut into L1-sized
//   chunks after all (LinearBlocking::stream_l1_chunks): x then stays in L1.
// - The 16 lane sums of each output are carried between chunks in a per-thread buffer, exactly:
//   chunk boundaries are multiples of 16, so every chain runs over k in the same order as without
//   chunks.
// - The cache sizes come from the CPU (sysconf); SetLinearBlocking overrides them for tests.
#include "model/kernels/linear_cpu.h"

#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "model/kernels/deterministic_math_cpu.h"
#include "model/kernels/linear_microkernel.h"
#include "model/kernels/tile_claims_cpu.h"

namespace lockstep::kernels {
namespace {

using linear_internal::ChunkTile;
using linear_internal::Isa;
using linear_internal::kLanes;

const Isa& DetectIsa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
    return linear_internal::Avx512Isa();
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return linear_internal::Avx2Isa();
  }
#endif
  return linear_internal::PortableIsa();
}

const Isa& DetectedIsa() {
  static const Isa& isa = DetectIsa();
  return isa;
}

// The family LinearTiles runs: the CPU's best, no wider than the kernels' active SIMD level
// (deterministic_math_cpu.h), which benchmarks lower to time a narrower CPU's kernels here.
const Isa& BestIsa() {
  const Isa& detected = DetectedIsa();
  switch (ActiveSimdLevel()) {
    case SimdLevel::kPortable:
      return linear_internal::PortableIsa();
#if defined(__x86_64__)
    case SimdLevel::kAvx2:
      return detected.kind == LinearKernel::kAvx512 ? linear_internal::Avx2Isa() : detected;
#endif
    default:
      return detected;
  }
}

const Isa* IsaFor(LinearKernel kernel) {
  switch (kernel) {
    case LinearKernel::kAuto:
      return &BestIsa();
#if defined(__x86_64__)
    case LinearKernel::kAvx512:
      return DetectedIsa().kind == LinearKernel::kAvx512 ? &linear_internal::Avx512Isa()
                                                          : nullptr;
    case LinearKernel::kAvx2:
      return DetectedIsa().kind != LinearKernel::kPortable ? &linear_internal::Avx2Isa() : nullptr;
#else
    case LinearKernel::kAvx512:
    case LinearKernel::kAvx2:
      return nullptr;
#endif
    case LinearKernel::kPortable:
      return &linear_internal::PortableIsa();
  }
  return nullptr;
}

// -----------------------------------------------------------------------------
// Blocking parameters: from the caches the CPU reports, unless a test set them.
int64_t CacheBytes(int name, int64_t fallback) {
  const long bytes = sysconf(name);
  return bytes > 0 ? static_cast<int64_t>(bytes) : fallback;
}

// AMD family 1Ah (Zen 5) and later: where the streaming tiles' non-temporal prefetch
// (linear_microkernel.h, kPrefetchNta) and narrow tiles (linear_avx512_cpu.cc) were measured
// faster. Zen 4 and Intel keep prefetcht1 and the wide tiles, which each was tuned with, until
// bench_linear_cold (it times both of each) says otherwise.
bool IsAmdZen5OrLater() {
#if defined(__x86_64__)
  __builtin_cpu_init();  // as DetectIsa: the vendor from the compiler's CPU model
  if (!__builtin_cpu_is("amd")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // the family from CPUID leaf 1
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned base_family = (eax >> 8) & 0xf;
  const unsigned family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  return family >= 0x1a;
#else
  return false;
#endif
}

LinearBlocking DetectBlocking() {
  LinearBlocking blocking;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  blocking.l1_bytes = CacheBytes(_SC_LEVEL1_DCACHE_SIZE, blocking.l1_bytes);
  blocking.l2_bytes = CacheBytes(_SC_LEVEL2_CACHE_SIZE, blocking.l2_bytes);
#endif
  blocking.x_chunk_bytes = blocking.l1_bytes / 2;
  blocking.stream_chunk_bytes = blocking.l2_bytes / 4;
  // Half of L2: AMD EPYC Zen 5 (L2 1 MiB), 1 thread, bench_linear_raw, M = 512: a quarter of L2
  // ran q/o 185, up 177, down 155 GFLOP/s, a half 197, 190, 173 (768 KiB and 1 MiB no better);
  // bench_kernels linear_ratio_m512 0.869-0.899 -> 0.912-0.919 and 512 x 2048 x 768 0.79-0.87 ->
  // 0.90-0.91 (two alternated runs each, 2026-12-06); bench_trainer unchanged (batch-invariant
  // step 12.2-13.3 s either way). Not measured on Zen 4 or Intel: their figures came with a
  // quarter (bench_linear_raw --column-block-kib compares).
  blocking.column_block_bytes = std::clamp<int64_t>(blocking.l2_bytes / 2, 64 << 10, 1 << 20);
  // A panel of x as large as L2: it stays in L2 and this core's share of L3 (shared with the
  // other cores and, in a VM, other tenants; glibc reported 320 MiB of L3 for a 32 MiB one) while
  // the column blocks pass. Measured at 4096 x 2048 x 768 (1 thread, load 7): 0.5-2 MiB panels
  // 77-80 GFLOP/s, 8 MiB 65, none 50.
  blocking.row_panel_bytes = blocking.l2_bytes;
  // One-column streaming tiles prefetch W in software, on every CPU so far. Off measured both
  // better and worse on the same AMD EPYC Zen 4 guest an hour apart (bench_linear_cold --rows 1,
  // 2 threads: off 0.94 / on 0.90 of a plain read, medians of 8 alternated runs at 07:15 UTC
  // 2026-12-06; off 0.73-1.05 / on 0.82-1.13, and at 1 thread 0.66-0.79 / 0.77-0.85, over 8
  // runs of both in one process at 07:35), and on took AMD EPYC Zen 5 from
  // 0.67-0.80 of a plain read (1 KiB ahead) to 0.83-0.95. bench_linear_cold prints both.
  blocking.stream_prefetch = 1;
  blocking.stream_prefetch_nta = IsAmdZen5OrLater() ? 1 : 0;
  blocking.stream_narrow_tiles = IsAmdZen5OrLater() ? 1 : 0;
  // Where a streaming tile's rows of all of K outgrow L1 (8 rows of the down projection's K =
  // 2048: 64 KiB), every x load missed L1 (our reading: and waited for a miss buffer behind the
  // weight lines); in L1-sized chunks x stays in L1 and the weight rows are read a chunk at a
  // time (the software prefetches keep running ahead inside the chunk). AMD EPYC Zen 5 (L1d 48
  // KiB), bench_linear_cold --rows 8, variants alternated in one process (2026-12-07): the down
  // projections alone 22.5 / 22.2 GB/s in one chunk, 28.3 / 26.2 in 24 KiB chunks (27.2 / 25.9
  // in 16 KiB ones, Zen 4's L1 half) at 1 thread, 39.2 / 39.6 against 45.9 / 49.7 at 2; the
  // whole sweep gained in each of three runs at both thread counts (bench/README.md). Not
  // measured elsewhere, but the rule is the CPU's own L1; bench_linear_cold times both.
  blocking.stream_l1_chunks = 1;
  return blocking;
}

struct BlockingHolder {
  std::atomic<int64_t> x_chunk_bytes, stream_chunk_bytes, column_block_bytes, row_panel_bytes;
  std::atomic<int> stream_prefetch, stream_prefetch_nta, stream_narrow_tiles, stream_l1_chunks;
  LinearBlocking detected;
  BlockingHolder() : detected(DetectBlocking()) {
    x_chunk_bytes = detected.x_chunk_bytes;
    stream_chunk_bytes = detected.stream_chunk_bytes;
    column_block_bytes = detected.column_block_bytes;
    row_panel_bytes = detected.row_panel_bytes;
    stream_prefetch = detected.stream_prefetch;
    stream_prefetch_nta = detected.stream_prefetch_nta;
    stream_narrow_tiles = detected.stream_narrow_tiles;
    stream_l1_chunks = detected.stream_l1_chunks;
  }
};

BlockingHolder& Blocking() {
  static BlockingHolder holder;
  return holder;
}

// -----------------------------------------------------------------------------
// Tiling: depends on M, N, K and the column block size only (never on the ISA, so tile ranges
// mean the same for every family). A column block of W is at most column_block_bytes, a multiple
// of 24 columns (every register-tile width divides it); decode-sized M is one row block of
// one-quantum column blocks, larger M blocks of 64 rows. Column blocks are halved (down to 24)
// while there are fewer than kMinTiles tiles, so that 2..16 threads all get work. Tiles are
// numbered panel by panel (a panel: panel_row_blocks row blocks, the last panel the rest), and
// inside a panel row block fastest.
constexpr int64_t kColumnQuantum = 24;
constexpr int64_t kMaxColumnBlock = 192;
constexpr int64_t kSmallRows = 16, kRowBlock = 64;
constexpr int64_t kMinTiles = 16;

struct Tiling {
  int64_t row_block, column_block, num_row_blocks, num_column_blocks;
  int64_t panel_row_blocks;  // row blocks per row panel (the last panel may hold fewer)
};

Tiling ChooseTiling(int64_t rows, int64_t out_features, int64_t in_features) {
  Tiling tiling;
  tiling.row_block = rows <= kSmallRows ? std::max<int64_t>(rows, 1) : kRowBlock;
  tiling.num_row_blocks = (rows + tiling.row_block - 1) / tiling.row_block;
  tiling.panel_row_blocks = tiling.num_row_blocks;
  if (tiling.num_row_blocks == 1) {
    // Decode-sized M: no other row block reuses a column block from L2, so blocks are one
    // quantum wide, which spreads the columns over any number of threads evenly (within one
    // quantum; 72-column blocks left q_proj's 768 columns split 432 / 336 over two threads).
    tiling.column_block = kColumnQuantum;
    tiling.num_column_blocks = (out_features + kColumnQuantum - 1) / kColumnQuantum;
    return tiling;
  }
  const int64_t fit = Blocking().column_block_bytes.load(std::memory_order_relaxed) /
                      (4 * std::max<int64_t>(in_features, 1));
  tiling.column_block =
      std::clamp<int64_t>(fit / kColumnQuantum * kColumnQuantum, kColumnQuantum, kMaxColumnBlock);
  auto num_column_blocks = [&] {
    return (out_features + tiling.column_block - 1) / tiling.column_block;
  };
  while (tiling.num_row_blocks * num_column_blocks() < kMinTiles &&
         tiling.column_block / 2 >= kColumnQuantum && tiling.column_block % 2 == 0 &&
         (tiling.column_block / 2) % kColumnQuantum == 0) {
    tiling.column_block /= 2;
  }
  tiling.num_column_blocks = num_column_blocks();
  const int64_t panel_rows = Blocking().row_panel_bytes.load(std::memory_order_relaxed) /
                             (4 * std::max<int64_t>(in_features, 1));
  tiling.panel_row_blocks =
      std::clamp<int64_t>(panel_rows / tiling.row_block, 1, tiling.num_row_blocks);
  return tiling;
}

struct TileRange {
  int64_t row_begin, row_end, column_begin, column_end;
  int64_t panel, panel_row_begin;  // the row panel, and its first row
  int64_t panel_rows;              // rows of the panel (the last panel may hold fewer)
};

// The rows and columns of tile `tile`: its panel, then row block fastest inside the panel.
TileRange TileAt(const Tiling& tiling, int64_t rows, int64_t out_features, int64_t tile) {
  const int64_t panel_tiles = tiling.panel_row_blocks * tiling.num_column_blocks;
  const int64_t panel = tile / panel_tiles;
  const int64_t first_row_block = panel * tiling.panel_row_blocks;
  const int64_t panel_row_blocks =
      std::min(tiling.panel_row_blocks, tiling.num_row_blocks - first_row_block);
  const int64_t local = tile - panel * panel_tiles;
  TileRange range;
  range.row_begin = (first_row_block + local % panel_row_blocks) * tiling.row_block;
  range.row_end = std::min(rows, range.row_begin + tiling.row_block);
  range.column_begin = (local / panel_row_blocks) * tiling.column_block;
  range.column_end = std::min(out_features, range.column_begin + tiling.column_block);
  range.panel = panel;
  range.panel_row_begin = first_row_block * tiling.row_block;
  range.panel_rows = std::min(rows, range.panel_row_begin + panel_row_blocks * tiling.row_block) -
                     range.panel_row_begin;
  return range;
}

// K chunks of a tile: as few as fit `rows` packed rows in `budget` bytes, of equal length
// rounded up to a multiple of 16 (the last one takes the rest).
int64_t ChunkLength(int64_t budget, int64_t rows, int64_t in_features) {
  const int64_t most = std::max<int64_t>(budget / (4 * rows) / kLanes * kLanes, kLanes);
  const int64_t chunks = std::max<int64_t>((in_features + most - 1) / most, 1);
  const int64_t even = (in_features + chunks - 1) / chunks;
  return std::max<int64_t>((even + kLanes - 1) / kLanes * kLanes, kLanes);
}

// K chunks of an in-cache tile (W from L2): all of K when `rows` packed rows of it take at most
// a third more than `budget` (two thirds of L1 for the detected half), else ChunkLength's. One
// chunk carries no sums through memory between chunks; where several are needed, the smaller
// ones leave L1 more room for the weight lines streaming past. On AMD EPYC Zen 5 (L1d 48 KiB),
// 1 thread, bench_linear_raw, seven alternated pairs (2026-12-06): 512 x 1024 x 1024 (8 rows of
// K = 1024, 32 KiB, in one chunk instead of two) ran at 0.85-0.95 of OpenBLAS in two chunks
// (median 0.94), 0.95-1.04 in one (median 1.00); 512 x 2048 x 768 in two chunks of 1024 instead
// of three of 688 gained nothing (1 thread: medians of five runs 0.87 both; 2 threads 0.86
// against 0.94, noisy), hence chunks of half of L1 whenever K takes more than one.
int64_t InCacheChunkLength(int64_t budget, int64_t rows, int64_t in_features) {
  const int64_t whole = std::max<int64_t>((in_features + kLanes - 1) / kLanes * kLanes, kLanes);
  if (rows * whole * int64_t{sizeof(float)} <= budget * 4 / 3) return whole;
  return ChunkLength(budget, rows, in_features);
}

// Per-thread, 64-byte-aligned, grown on demand, never shrunk.
class AlignedBuffer {
 public:
  ~AlignedBuffer() { std::free(data_); }
  float* Get(int64_t floats) {
    if (floats > capacity_) {
      std::free(data_);
      capacity_ = (floats + 15) / 16 * 16;
      data_ = static_cast<float*>(std::aligned_alloc(64, capacity_ * sizeof(float)));
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  int64_t capacity_ = 0;
};

// The rows of x one LinearTiles call has packed on this thread: the current row panel's rows,
// all of K each, 64-byte-aligned, a multiple of 16 floats plus one cache line apart (rows a
// multiple of 4 KiB apart would share L1 sets). A row block is copied the first time one of the
// call's tiles needs it and read in place by every later tile: K chunks are windows into it.
// x used to be copied per tile and K chunk, again for every column block of W: 2048 x 768 x 768
// ran at 217-223 GFLOP/s and 2048 x 2048 x 768 at 166 that way, 234 and 203-204 now (1 thread,
// AMD EPYC Zen 5); at decode sizes the per-tile copies were ~10% of a step at 8 rows.
class PackedX {
 public:
  explicit PackedX(int64_t depth) : stride_((depth + kLanes - 1) / kLanes * kLanes + kLanes) {}

  // Rows [range.row_begin, range.row_end) of x, packed; row i at Rows() + i * stride().
  const float* Rows(const LinearProblem& p, const Tiling& tiling, const TileRange& range) {
    const int64_t depth = p.in_features;
    thread_local AlignedBuffer buffer;
    thread_local std::vector<char> packed_row_blocks;
    float* const panel = buffer.Get(range.panel_rows * stride_);
    if (range.panel != panel_) {  // a new panel: nothing of it packed yet
      panel_ = range.panel;
      packed_row_blocks.assign(tiling.panel_row_blocks, 0);
    }
    const int64_t first = range.row_begin - range.panel_row_begin;
    char& packed = packed_row_blocks[first / tiling.row_block];
    if (!packed) {
      for (int64_t row = range.row_begin; row < range.row_end; ++row) {
        std::memcpy(panel + (row - range.panel_row_begin) * stride_, p.x + row * p.x_stride,
                    depth * sizeof(float));
      }
      packed = 1;
    }
    return panel + first * stride_;
  }
  int64_t stride() const { return stride_; }

 private:
  const int64_t stride_;
  int64_t panel_ = -1;
};

void ComputeTile(const Isa& isa, const LinearProblem& p, const Tiling& tiling, int64_t tile,
                 PackedX* packed_x) {
  thread_local AlignedBuffer partials;
  const TileRange range = TileAt(tiling, p.rows, p.out_features, tile);
  const int64_t row_begin = range.row_begin, row_end = range.row_end;
  const int64_t column_begin = range.column_begin, column_end = range.column_end;
  const int64_t depth = p.in_features;
  // One row block streams each W column block from memory once; several reuse it from L2.
  const bool streaming = tiling.num_row_blocks == 1;
  const bool narrow = Blocking().stream_narrow_tiles.load(std::memory_order_relaxed) != 0;
  const std::array<int, linear_internal::kMaxRows + 1>& columns_for_rows =
      !streaming ? isa.columns_for_rows
      : narrow   ? isa.narrow_streaming_columns_for_rows
                 : isa.streaming_columns_for_rows;
  const int main_rows = streaming ? isa.streaming_main_rows : isa.main_rows;
  const int64_t x_chunk_bytes = Blocking().x_chunk_bytes.load(std::memory_order_relaxed);
  const int64_t chunk = [&] {
    if (!streaming) return InCacheChunkLength(x_chunk_bytes, main_rows, depth);
    const int64_t rows = std::min<int64_t>(main_rows, row_end - row_begin);
    // x of a streaming tile outgrowing L1 (LinearBlocking::stream_l1_chunks): L1-sized chunks,
    // unless the tile is one column (W then one sequential stream, kept whole).
    if (Blocking().stream_l1_chunks.load(std::memory_order_relaxed) != 0 &&
        columns_for_rows[rows] > 1 && rows * depth * int64_t{sizeof(float)} > 2 * x_chunk_bytes) {
      return ChunkLength(x_chunk_bytes, rows, depth);
    }
    return ChunkLength(Blocking().stream_chunk_bytes.load(std::memory_order_relaxed), rows, depth);
  }();
  const int64_t num_chunks = std::max<int64_t>((depth + chunk - 1) / chunk, 1);
  const float* const x = packed_x->Rows(p, tiling, range);
  const int64_t x_stride = packed_x->stride();
  ChunkTile t;
  t.x_stride = x_stride;
  t.w_stride = depth;
  t.partial_stride = tiling.column_block;
  t.partial = num_chunks > 1 ? partials.Get(main_rows * tiling.column_block * kLanes) : nullptr;
  t.y_stride = p.y_stride;
  const bool nta = Blocking().stream_prefetch_nta.load(std::memory_order_relaxed) != 0;
  const linear_internal::KernelTable& table =
      streaming ? (nta ? *isa.streaming_nta_table : *isa.streaming_table) : *isa.table;
  // One-column streaming tiles without the software prefetch: the in-cache kernel of that shape.
  const linear_internal::KernelTable& one_column_table =
      streaming && Blocking().stream_prefetch.load(std::memory_order_relaxed) == 0 ? *isa.table
                                                                                   : table;
  // Row groups outside (their packed chunk of x stays in L1), chunks, then the block's columns
  // (W from L2).
  for (int64_t row = row_begin; row < row_end; row += main_rows) {
    const int rows = static_cast<int>(std::min<int64_t>(main_rows, row_end - row));
    const int width = columns_for_rows[rows];
    const float* const xp = x + (row - row_begin) * x_stride;
    float* const partial_base = t.partial;
    for (int64_t c = 0; c < num_chunks; ++c) {
      const int64_t k0 = c * chunk;
      t.x = xp + k0;
      t.length = std::min(chunk, depth - k0);
      t.first = c == 0;
      t.last = c == num_chunks - 1;
      for (int64_t column = column_begin; column < column_end; column += width) {
        const int columns = static_cast<int>(std::min<int64_t>(width, column_end - column));
        t.w = p.weight + column * depth + k0;
        t.partial = partial_base + (column - column_begin) * kLanes;
        t.bias = p.bias != nullptr ? p.bias + column : nullptr;
        t.y = p.y + row * p.y_stride + column;
        (width == 1 ? one_column_table : table)[rows - 1][columns - 1](t);
      }
      t.partial = partial_base;
    }
  }
}

bool Empty(const LinearProblem& p) { return p.rows <= 0 || p.out_features <= 0; }

}  // namespace

int64_t NumLinearTiles(const LinearProblem& problem) {
  if (Empty(problem)) return 0;
  const Tiling tiling = ChooseTiling(problem.rows, problem.out_features, problem.in_features);
  return tiling.num_row_blocks * tiling.num_column_blocks;
}

bool LinearTilesWithKernel(LinearKernel kernel, const LinearProblem& problem, int64_t tile_begin,
                           int64_t tile_end) {
  const Isa* isa = IsaFor(kernel);
  if (isa == nullptr) return false;
  if (Empty(problem)) return true;
  const Tiling tiling = ChooseTiling(problem.rows, problem.out_features, problem.in_features);
  tile_end = std::min(tile_end, tiling.num_row_blocks * tiling.num_column_blocks);
  PackedX packed_x(problem.in_features);
  for (int64_t tile = std::max<int64_t>(tile_begin, 0); tile < tile_end; ++tile)
    ComputeTile(*isa, problem, tiling, tile, &packed_x);
  return true;
}

void LinearTiles(const LinearProblem& problem, int64_t tile_begin, int64_t tile_end) {
  LinearTilesWithKernel(LinearKernel::kAuto, problem, tile_begin, tile_end);
}

void LinearClaimedTiles(const LinearProblem& problem, TileClaims* claims, int part) {
  LinearClaimedTiles(&problem, 1, claims, part);
}

int64_t NumLinearTiles(const LinearProblem* problems, int count) {
  int64_t tiles = 0;
  for (int i = 0; i < count; ++i) tiles += NumLinearTiles(problems[i]);
  return tiles;
}

void LinearClaimedTiles(const LinearProblem* problems, int count, TileClaims* claims, int part) {
  // The problem a tile belongs to is found by walking the problems' tile counts (a handful).
  std::vector<Tiling> tilings;
  std::vector<int64_t> first_tiles;  // problem i's tiles: [first_tiles[i], first_tiles[i + 1])
  tilings.reserve(count);
  first_tiles.reserve(count + 1);
  first_tiles.push_back(0);
  for (int i = 0; i < count; ++i) {
    const LinearProblem& p = problems[i];
    tilings.push_back(ChooseTiling(p.rows, p.out_features, p.in_features));
    const Tiling& t = tilings.back();
    first_tiles.push_back(first_tiles.back() +
                          (Empty(p) ? 0 : t.num_row_blocks * t.num_column_blocks));
  }
  // One PackedX per thread and problem in turn: the packed rows are reused by the problem's
  // following tiles, and packed afresh when a tile of another problem comes.
  std::optional<PackedX> packed_x;
  int current = -1;
  for (int64_t tile = claims->Next(part); tile >= 0; tile = claims->Next(part)) {
    int i = 0;
    while (tile >= first_tiles[i + 1]) ++i;
    if (i != current) {
      current = i;
      packed_x.emplace(problems[i].in_features);
    }
    ComputeTile(BestIsa(), problems[i], tilings[i], tile - first_tiles[i], &*packed_x);
  }
}

const char* LinearKernelName() { return BestIsa().name; }

std::string LinearKernelDescription(LinearKernel kernel) {
  const Isa* chosen = IsaFor(kernel);
  const Isa& isa = chosen != nullptr ? *chosen : BestIsa();
  const LinearBlocking b = CurrentLinearBlocking();
  const std::array<int, linear_internal::kMaxRows + 1>& streaming_columns =
      b.stream_narrow_tiles != 0 ? isa.narrow_streaming_columns_for_rows
                                 : isa.streaming_columns_for_rows;
  return std::string(isa.name) + " " + std::to_string(isa.main_rows) + "x" +
         std::to_string(isa.columns_for_rows[isa.main_rows]) + " tile (streaming " +
         std::to_string(isa.streaming_main_rows) + "x" +
         std::to_string(streaming_columns[isa.streaming_main_rows]) +
         (b.stream_narrow_tiles != 0 ? ", narrow" : "") + "), x chunk " +
         std::to_string(b.x_chunk_bytes >> 10) + " KiB (streaming " +
         std::to_string(b.stream_chunk_bytes >> 10) + " KiB" +
         (b.stream_l1_chunks != 0 ? ", L1 chunks where x outgrows L1" : "") +
         "), W column block " +
         std::to_string(b.column_block_bytes >> 10) + " KiB, x row panel " +
         std::to_string(b.row_panel_bytes >> 10) + " KiB, one-column stream prefetch " +
         (b.stream_prefetch != 0
              ? std::to_string(linear_internal::kStreamPrefetchFloats * 4 >> 10) + " KiB"
              : std::string("off")) +
         ", stream prefetch hint " + (b.stream_prefetch_nta != 0 ? "NTA" : "T1") + " (L1d " +
         std::to_string(b.l1_bytes >> 10) + " KiB, L2 " + std::to_string(b.l2_bytes >> 10) +
         " KiB)";
}

LinearBlocking CurrentLinearBlocking() {
  LinearBlocking b = Blocking().detected;
  b.x_chunk_bytes = Blocking().x_chunk_bytes.load();
  b.stream_chunk_bytes = Blocking().stream_chunk_bytes.load();
  b.column_block_bytes = Blocking().column_block_bytes.load();
  b.row_panel_bytes = Blocking().row_panel_bytes.load();
  b.stream_prefetch = Blocking().stream_prefetch.load();
  b.stream_prefetch_nta = Blocking().stream_prefetch_nta.load();
  b.stream_narrow_tiles = Blocking().stream_narrow_tiles.load();
  b.stream_l1_chunks = Blocking().stream_l1_chunks.load();
  return b;
}

void SetLinearBlocking(const LinearBlocking& blocking) {
  const LinearBlocking& detected = Blocking().detected;
  // A size <= 0 and a choice < 0 leave the detected value; a choice >= 0 is on (1) or off (0).
  const auto size = [](int64_t set, int64_t detected_size) {
    return set > 0 ? set : detected_size;
  };
  const auto choice = [](int set, int detected_choice) {
    return set >= 0 ? (set != 0 ? 1 : 0) : detected_choice;
  };
  Blocking().x_chunk_bytes = size(blocking.x_chunk_bytes, detected.x_chunk_bytes);
  Blocking().stream_chunk_bytes = size(blocking.stream_chunk_bytes, detected.stream_chunk_bytes);
  Blocking().column_block_bytes = size(blocking.column_block_bytes, detected.column_block_bytes);
  Blocking().row_panel_bytes = size(blocking.row_panel_bytes, detected.row_panel_bytes);
  Blocking().stream_prefetch = choice(blocking.stream_prefetch, detected.stream_prefetch);
  Blocking().stream_prefetch_nta =
      choice(blocking.stream_prefetch_nta, detected.stream_prefetch_nta);
  Blocking().stream_narrow_tiles =
      choice(blocking.stream_narrow_tiles, detected.stream_narrow_tiles);
  Blocking().stream_l1_chunks = choice(blocking.stream_l1_chunks, detected.stream_l1_chunks);
}

}  // namespace lockstep::kernels
