// Batch-invariant CPU linear: y = x W^T (+ b), fp32.
//
// Every output element is one sequential FMA chain over k (acc = 0; acc =
// fma(x[m,k], W[n,k], acc); y = acc (+ b[n])), so its bits depend only on K.
// Vectorisation runs ACROSS output columns, never across k: W is packed into
// column panels of 16 lanes laid out [panel][k][16] (zero padded past N); a
// micro-kernel broadcasts x[m, k] and FMAs it into a register tile of MR rows x
// NP panels. Every micro-kernel shape, every ISA variant (AVX-512, AVX2,
// portable std::fma) and every tile shape runs the same per-element chain, so
// the results are bit-identical across all of them.
//
// Tiles are (row block x panel block) units in row-block-fastest order:
// consecutive tiles share a W column block, which then stays in L2 while the
// rows stream past it.
#include "model/kernels/linear_cpu.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <new>
#include <utility>

#if defined(__x86_64__)
#define LOCKSTEP_LINEAR_X86 1
#include <immintrin.h>
#endif

namespace lockstep::kernels {
namespace {

// Columns per packed panel: one zmm, two ymm.
constexpr int64_t kPanelWidth = 16;

int64_t NumPanels(int64_t out_features) {
  return (out_features + kPanelWidth - 1) / kPanelWidth;
}

// One register tile: rows [0, MR) of x and y, panels [0, NP) of the packed
// weight.
struct MicroTile {
  const float* x;  // first row of the tile
  int64_t x_stride;
  const float* w;        // first panel of the tile
  int64_t panel_floats;  // K * kPanelWidth
  int64_t depth;         // K
  const float* bias;     // bias of the first column, or nullptr
  float* y;              // first row, first column of the tile
  int64_t y_stride;
  int last_lanes;  // valid columns in the last panel, 1..16
};

using MicroKernel = void (*)(const MicroTile&);

// -----------------------------------------------------------------------------
// Portable: the reference chain with std::fma, which rounds exactly like one
// vector FMA lane.
void MicroPortable(const MicroTile& t, int rows, int panels) {
  for (int i = 0; i < rows; ++i) {
    const float* x_row = t.x + i * t.x_stride;
    for (int j = 0; j < panels; ++j) {
      const int lanes =
          j == panels - 1 ? t.last_lanes : static_cast<int>(kPanelWidth);
      const float* w = t.w + j * t.panel_floats;
      for (int lane = 0; lane < lanes; ++lane) {
        float acc = 0.0f;
        for (int64_t k = 0; k < t.depth; ++k)
          acc = std::fma(x_row[k], w[k * kPanelWidth + lane], acc);
        if (t.bias != nullptr) acc = acc + t.bias[j * kPanelWidth + lane];
        t.y[i * t.y_stride + j * kPanelWidth + lane] = acc;
      }
    }
  }
}

// Micro-kernels by register-tile shape, [rows - 1][panels - 1].
constexpr int kMaxRows = 8;
constexpr int kMaxPanels = 8;
using KernelTable = std::array<std::array<MicroKernel, kMaxPanels>, kMaxRows>;

// A micro-kernel family: the register tile for big row counts, and how many
// panels a tile of `rows` (< main_rows) rows takes at once.
struct Isa {
  LinearKernel kind;
  const KernelTable* table;  // nullptr: portable
  int main_rows;
  int main_panels;
  std::array<int, kMaxRows + 1> panels_for_rows;  // [rows], rows <= main_rows
};

constexpr Isa kPortableIsa{
    LinearKernel::kPortable, nullptr, 8, 3, {0, 8, 8, 4, 4, 4, 4, 3, 3}};

#if LOCKSTEP_LINEAR_X86
// -----------------------------------------------------------------------------
// AVX-512: a zmm per (row, panel); up to 28 accumulators.
#define LOCKSTEP_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

template <int MR, int NP>
LOCKSTEP_AVX512 void MicroAvx512(const MicroTile& t) {
  __m512 acc[MR][NP];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
  const float* x = t.x;
  const float* w = t.w;
  const int64_t x_stride = t.x_stride;
  const int64_t panel_floats = t.panel_floats;
  const int64_t depth = t.depth;
  for (int64_t k = 0; k < depth; ++k) {
    __m512 wv[NP];
#pragma GCC unroll 16
    for (int j = 0; j < NP; ++j)
      wv[j] = _mm512_load_ps(w + j * panel_floats + k * kPanelWidth);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 xb = _mm512_set1_ps(x[i * x_stride + k]);
#pragma GCC unroll 16
      for (int j = 0; j < NP; ++j)
        acc[i][j] = _mm512_fmadd_ps(xb, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NP; ++j) {
    const __mmask16 mask =
        j == NP - 1 ? static_cast<__mmask16>((1u << t.last_lanes) - 1u)
                    : static_cast<__mmask16>(0xFFFF);
    __m512 b = _mm512_setzero_ps();
    if (t.bias != nullptr)
      b = _mm512_maskz_loadu_ps(mask, t.bias + j * kPanelWidth);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      __m512 out = acc[i][j];
      if (t.bias != nullptr) out = _mm512_add_ps(out, b);
      _mm512_mask_storeu_ps(t.y + i * t.y_stride + j * kPanelWidth, mask, out);
    }
  }
}

// -----------------------------------------------------------------------------
// AVX2: a panel is two ymm halves; up to 12 accumulators.
#define LOCKSTEP_AVX2 __attribute__((target("avx2,fma")))

// Mask of the first `lanes` lanes (none if lanes <= 0, all if lanes >= 8).
LOCKSTEP_AVX2 inline __m256i HalfMask(int lanes) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), index);
}

template <int MR, int NP>
LOCKSTEP_AVX2 void MicroAvx2(const MicroTile& t) {
  __m256 acc[MR][2 * NP];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < 2 * NP; ++j) acc[i][j] = _mm256_setzero_ps();
  const float* x = t.x;
  const float* w = t.w;
  const int64_t x_stride = t.x_stride;
  const int64_t panel_floats = t.panel_floats;
  const int64_t depth = t.depth;
  for (int64_t k = 0; k < depth; ++k) {
    __m256 wv[2 * NP];
#pragma GCC unroll 16
    for (int j = 0; j < NP; ++j) {
      wv[2 * j] = _mm256_load_ps(w + j * panel_floats + k * kPanelWidth);
      wv[2 * j + 1] =
          _mm256_load_ps(w + j * panel_floats + k * kPanelWidth + 8);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m256 xb = _mm256_broadcast_ss(x + i * x_stride + k);
#pragma GCC unroll 16
      for (int j = 0; j < 2 * NP; ++j)
        acc[i][j] = _mm256_fmadd_ps(xb, wv[j], acc[i][j]);
    }
  }
  // Fully unrolled (constant indices) so that acc stays in registers through
  // the k loop.
#pragma GCC unroll 16
  for (int h = 0; h < 2 * NP; ++h) {
    const int lanes = h / 2 == NP - 1 ? t.last_lanes - 8 * (h % 2)
                                      : 8;  // <= 0: nothing to store
    const __m256i mask = HalfMask(lanes);
    __m256 b = _mm256_setzero_ps();
    if (t.bias != nullptr) b = _mm256_maskload_ps(t.bias + 8 * h, mask);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      __m256 out = acc[i][h];
      if (t.bias != nullptr) out = _mm256_add_ps(out, b);
      _mm256_maskstore_ps(t.y + i * t.y_stride + 8 * h, mask, out);
    }
  }
}

// -----------------------------------------------------------------------------
// Kernel tables: nullptr where a shape would not fit the register file.

template <template <int, int> class Family, int MR, int NP>
constexpr MicroKernel Entry() {
  if constexpr (Family<MR, NP>::kFits) return &Family<MR, NP>::Run;
  return nullptr;
}
template <template <int, int> class Family, int MR, int... NPs>
constexpr std::array<MicroKernel, kMaxPanels> TableRow(
    std::integer_sequence<int, NPs...>) {
  return {Entry<Family, MR, NPs + 1>()...};
}
template <template <int, int> class Family, int... MRs>
constexpr KernelTable MakeTable(std::integer_sequence<int, MRs...>) {
  return {TableRow<Family, MRs + 1>(
      std::make_integer_sequence<int, kMaxPanels>())...};
}

template <int MR, int NP>
struct Avx512Family {
  static constexpr bool kFits =
      MR * NP + NP + 1 <= 32;  // accumulators + W + broadcast
  static void Run(const MicroTile& t) { MicroAvx512<MR, NP>(t); }
};
template <int MR, int NP>
struct Avx2Family {
  static constexpr bool kFits = MR <= 6 && 2 * MR * NP <= (MR == 1 ? 8 : 12);
  static void Run(const MicroTile& t) { MicroAvx2<MR, NP>(t); }
};

constexpr KernelTable kAvx512Table =
    MakeTable<Avx512Family>(std::make_integer_sequence<int, kMaxRows>());
constexpr KernelTable kAvx2Table =
    MakeTable<Avx2Family>(std::make_integer_sequence<int, kMaxRows>());

// 8 x 48 main tile: 24 accumulators, 3 W loads + 8 broadcasts per 24 FMAs.
// Fewer rows take more panels at once (so M = 1 still runs 8 independent
// chains) in groups that divide the 8-panel decode tile.
constexpr Isa kAvx512Isa{
    LinearKernel::kAvx512, &kAvx512Table, 8, 3, {0, 8, 8, 4, 4, 4, 4, 3, 3}};
// The classic Haswell 6 x 16 tile: 12 accumulators, 2 W loads + 6 broadcasts
// per 12 FMAs.
constexpr Isa kAvx2Isa{
    LinearKernel::kAvx2, &kAvx2Table, 6, 1, {0, 4, 3, 2, 1, 1, 1, 1, 1}};

// Every (rows, panels) shape ComputeTile can ask of a family has a kernel in
// its table.
constexpr bool CoversAllShapes(const Isa& isa, const KernelTable& table) {
  for (int rows = 1; rows <= isa.main_rows; ++rows) {
    const int max_panels = std::max(isa.panels_for_rows[rows], isa.main_panels);
    for (int panels = 1; panels <= max_panels; ++panels) {
      if (table[rows - 1][panels - 1] == nullptr) return false;
    }
  }
  return true;
}
static_assert(CoversAllShapes(kAvx512Isa, kAvx512Table) &&
              CoversAllShapes(kAvx2Isa, kAvx2Table));
#endif  // LOCKSTEP_LINEAR_X86

const Isa& DetectIsa() {
#if LOCKSTEP_LINEAR_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma")) {
    return kAvx512Isa;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return kAvx2Isa;
#endif
  return kPortableIsa;
}

const Isa& BestIsa() {
  static const Isa& isa = DetectIsa();
  return isa;
}

// -----------------------------------------------------------------------------
// Tiling: depends on M and N only (never on the ISA, so tile ranges mean the
// same everywhere).
struct Tiling {
  int64_t row_block;    // rows per tile
  int64_t panel_block;  // panels per tile
  int64_t num_row_blocks;
  int64_t num_panel_blocks;
};

// Decode-sized M (<= 16): one row block, tiles of 8 panels (128 columns).
// Larger M: blocks of 96 rows x 12 panels (192 columns; at K = 1024 a 3-panel
// group is 192 KB and the row block 384 KB, so both stay in the 1 MB L2 while
// the group's rows stream). Either way the panel block is halved (down to one
// register-tile group) while there are fewer than kMinTiles tiles, so
// that 2..16 threads all get work.
constexpr int64_t kSmallRows = 16;
constexpr int64_t kSmallPanelBlock = 8, kSmallMinPanelBlock = 4;
constexpr int64_t kRowBlock = 96, kPanelBlock = 12, kMinPanelBlock = 3;
constexpr int64_t kMinTiles = 16;

Tiling ChooseTiling(int64_t rows, int64_t out_features) {
  const int64_t num_panels = NumPanels(out_features);
  const bool small = rows <= kSmallRows;
  Tiling tiling;
  tiling.row_block = small ? std::max<int64_t>(rows, 1) : kRowBlock;
  tiling.panel_block = small ? kSmallPanelBlock : kPanelBlock;
  const int64_t min_panel_block = small ? kSmallMinPanelBlock : kMinPanelBlock;
  tiling.num_row_blocks = (rows + tiling.row_block - 1) / tiling.row_block;
  auto num_panel_blocks = [&] {
    return (num_panels + tiling.panel_block - 1) / tiling.panel_block;
  };
  while (tiling.num_row_blocks * num_panel_blocks() < kMinTiles &&
         tiling.panel_block / 2 >= min_panel_block) {
    tiling.panel_block /= 2;
  }
  tiling.num_panel_blocks = num_panel_blocks();
  return tiling;
}

void ComputeTile(const Isa& isa, const LinearProblem& p, const Tiling& tiling,
                 int64_t tile) {
  const PackedLinearWeight& weight = *p.weight;
  const int64_t n_total = weight.out_features;
  const int64_t depth = weight.in_features;
  const int64_t panel_floats = depth * kPanelWidth;
  const int64_t num_panels = NumPanels(n_total);

  const int64_t row_begin = (tile % tiling.num_row_blocks) * tiling.row_block;
  const int64_t row_end = std::min(p.rows, row_begin + tiling.row_block);
  const int64_t panel_begin =
      (tile / tiling.num_row_blocks) * tiling.panel_block;
  const int64_t panel_end =
      std::min(num_panels, panel_begin + tiling.panel_block);
  const int64_t tile_rows = row_end - row_begin;

  const int main_rows =
      static_cast<int>(std::min<int64_t>(tile_rows, isa.main_rows));
  const int group_panels = tile_rows <= isa.main_rows
                               ? isa.panels_for_rows[main_rows]
                               : isa.main_panels;

  MicroTile t;
  t.x_stride = p.x_stride;
  t.panel_floats = panel_floats;
  t.depth = depth;
  t.y_stride = p.y_stride;
  // Column groups outside, row groups inside: the group's W panels stay in
  // L1/L2 while the tile's rows stream past them.
  for (int64_t panel = panel_begin; panel < panel_end; panel += group_panels) {
    const int panels =
        static_cast<int>(std::min<int64_t>(group_panels, panel_end - panel));
    const int64_t col = panel * kPanelWidth;
    t.w = weight.data.get() + panel * panel_floats;
    t.bias = p.bias != nullptr ? p.bias + col : nullptr;
    t.last_lanes = static_cast<int>(std::min<int64_t>(
        kPanelWidth, n_total - (panel + panels - 1) * kPanelWidth));
    for (int64_t row = row_begin; row < row_end; row += main_rows) {
      const int rows =
          static_cast<int>(std::min<int64_t>(main_rows, row_end - row));
      t.x = p.x + row * p.x_stride;
      t.y = p.y + row * p.y_stride + col;
      if (isa.table == nullptr) {
        MicroPortable(t, rows, panels);
      } else {
        (*isa.table)[rows - 1][panels - 1](t);
      }
    }
  }
}

const Isa* IsaFor(LinearKernel kernel) {
  switch (kernel) {
    case LinearKernel::kAuto:
      return &BestIsa();
#if LOCKSTEP_LINEAR_X86
    case LinearKernel::kAvx512:
      return BestIsa().kind == LinearKernel::kAvx512 ? &kAvx512Isa : nullptr;
    case LinearKernel::kAvx2:
      return BestIsa().kind != LinearKernel::kPortable ? &kAvx2Isa : nullptr;
#else
    case LinearKernel::kAvx512:
    case LinearKernel::kAvx2:
      return nullptr;
#endif
    case LinearKernel::kPortable:
      return &kPortableIsa;
  }
  return nullptr;
}

// 64-byte aligned storage; large packs are 2 MB aligned and ask for transparent
// huge pages, since first-touch faults on 4 KB pages cost more than the packing
// itself (~350 ms for the 98 MB LM head on a VM, ~20 ms with huge pages).
std::shared_ptr<float> AllocatePacked(int64_t num_floats) {
  constexpr size_t kHugePage = size_t{1} << 21;
  size_t bytes =
      static_cast<size_t>(num_floats) * sizeof(float);  // a multiple of 64
  const bool huge = bytes >= kHugePage;
  if (huge) bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  float* storage =
      static_cast<float*>(std::aligned_alloc(huge ? kHugePage : 64, bytes));
  if (storage == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (huge) madvise(storage, bytes, MADV_HUGEPAGE);  // a hint; may fail
#endif
  return std::shared_ptr<float>(storage, std::free);
}

// out[panel][k][lane] = W[panel * 16 + lane][k], zero past N.
void PackInto(const float* weight, int64_t out_features, int64_t in_features,
              float* out) {
  const int64_t num_panels = NumPanels(out_features);
  for (int64_t panel = 0; panel < num_panels; ++panel) {
    float* panel_out = out + panel * in_features * kPanelWidth;
    for (int64_t lane = 0; lane < kPanelWidth; ++lane) {
      const int64_t n = panel * kPanelWidth + lane;
      if (n >= out_features) {
        for (int64_t k = 0; k < in_features; ++k)
          panel_out[k * kPanelWidth + lane] = 0.0f;
        continue;
      }
      const float* w_row = weight + n * in_features;
      for (int64_t k = 0; k < in_features; ++k)
        panel_out[k * kPanelWidth + lane] = w_row[k];
    }
  }
}

}  // namespace

PackedLinearWeight PackLinearWeight(const float* weight, int64_t out_features,
                                    int64_t in_features) {
  PackedLinearWeight packed;
  packed.out_features = out_features;
  packed.in_features = in_features;
  packed.num_floats = NumPanels(out_features) * in_features * kPanelWidth;
  if (packed.num_floats == 0) return packed;
  packed.data = AllocatePacked(packed.num_floats);
  PackInto(weight, out_features, in_features, packed.data.get());
  return packed;
}

void RepackLinearWeight(const float* weight, PackedLinearWeight* packed) {
  if (packed->num_floats == 0) return;
  if (packed->data == nullptr)
    packed->data = AllocatePacked(packed->num_floats);
  PackInto(weight, packed->out_features, packed->in_features,
           packed->data.get());
}

int64_t NumLinearTiles(const LinearProblem& problem) {
  if (problem.rows <= 0 || problem.weight == nullptr ||
      problem.weight->out_features <= 0)
    return 0;
  const Tiling tiling =
      ChooseTiling(problem.rows, problem.weight->out_features);
  return tiling.num_row_blocks * tiling.num_panel_blocks;
}

bool LinearTilesWithKernel(LinearKernel kernel, const LinearProblem& problem,
                           int64_t tile_begin, int64_t tile_end) {
  const Isa* isa = IsaFor(kernel);
  if (isa == nullptr) return false;
  if (problem.rows <= 0 || problem.weight == nullptr ||
      problem.weight->out_features <= 0)
    return true;
  const Tiling tiling =
      ChooseTiling(problem.rows, problem.weight->out_features);
  tile_begin = std::max<int64_t>(tile_begin, 0);
  tile_end =
      std::min(tile_end, tiling.num_row_blocks * tiling.num_panel_blocks);
  for (int64_t tile = tile_begin; tile < tile_end; ++tile)
    ComputeTile(*isa, problem, tiling, tile);
  return true;
}

void LinearTiles(const LinearProblem& problem, int64_t tile_begin,
                 int64_t tile_end) {
  LinearTilesWithKernel(LinearKernel::kAuto, problem, tile_begin, tile_end);
}

const char* LinearKernelName() {
  switch (BestIsa().kind) {
    case LinearKernel::kAvx512:
      return "avx512";
    case LinearKernel::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

}  // namespace lockstep::kernels
