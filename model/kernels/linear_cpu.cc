// Batch-invariant CPU linear: y = x W^T (+ b), fp32, W read in place.
//
// The fixed order (see linear_cpu.h): for output (m, n), lane l of a 16-lane accumulator sums
// x[m, k] * W[n, k] over k = l, l + 16, l + 32, ... as one FMA chain (inputs past K read as 0);
// then t_l = v_l + v_{l+8}, s_l = t_l + t_{l+4} (l < 4), and y = ((s0 + s2) + (s1 + s3)) + b[n].
// x rows and W rows are both contiguous in k, so a micro-kernel loads 16 consecutive k of MR rows
// of x and NR rows of W and FMAs every pair into MR x NR accumulators; no packed copy of W
// exists and no operand is transposed. Every ISA variant and tile shape runs the same
// per-element order, so the results are bit-identical across all of them.
//
// Tiles are (row block x column block) units in row-block-fastest order: consecutive tiles share
// a column block of W, which then stays in L2 while the rows stream past it. Inside a tile, MR
// rows of x stay in L1 while the block's W rows stream from L2.
#include "model/kernels/linear_cpu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#if defined(__x86_64__)
#define LOCKSTEP_LINEAR_X86 1
#include <immintrin.h>
#endif

namespace lockstep::kernels {
namespace {

constexpr int kLanes = 16;   // k positions per accumulator (one zmm, two ymm)
constexpr int kMaxRows = 8;  // MR of the main register tile
constexpr int kMaxColumns = 12;

// One register tile: `rows` rows of x by `columns` rows of W, each output reduced over all of K.
struct MicroTile {
  const float* x;  // first row
  int64_t x_stride;
  const float* w;  // first weight row (rows are `depth` floats apart)
  int64_t depth;   // K
  const float* bias;  // bias of the first column, or nullptr
  float* y;           // first row, first column
  int64_t y_stride;
};

using MicroKernel = void (*)(const MicroTile&);
// [rows - 1][columns - 1]; every shape a tile can ask of its family is filled.
using KernelTable = std::array<std::array<MicroKernel, kMaxColumns>, kMaxRows>;

// A micro-kernel family: its kernels and, by number of rows, the columns of its register tile.
// Column counts divide kColumnQuantum (below), so every column block splits evenly.
struct Isa {
  LinearKernel kind;
  const KernelTable* table;
  int main_rows;  // rows of the main register tile (<= kMaxRows)
  std::array<int, kMaxRows + 1> columns_for_rows;
};

template <template <int, int> class Family, int MR, int... NRs>
constexpr std::array<MicroKernel, kMaxColumns> TableRow(std::integer_sequence<int, NRs...>) {
  return {(NRs + 1 <= Family<MR, NRs + 1>::kMaxColumns ? &Family<MR, NRs + 1>::Run : nullptr)...};
}
template <template <int, int> class Family, int... MRs>
constexpr KernelTable MakeTable(std::integer_sequence<int, MRs...>) {
  return {TableRow<Family, MRs + 1>(std::make_integer_sequence<int, kMaxColumns>())...};
}

// -----------------------------------------------------------------------------
// Portable: the reference order with std::fma, which rounds exactly like one vector FMA lane.
float ReduceLanes(const float* v) {
  float t[8];
  for (int l = 0; l < 8; ++l) t[l] = v[l] + v[l + 8];
  const float s0 = t[0] + t[4], s1 = t[1] + t[5], s2 = t[2] + t[6], s3 = t[3] + t[7];
  return (s0 + s2) + (s1 + s3);
}

template <int MR, int NR>
void MicroPortable(const MicroTile& t) {
  for (int i = 0; i < MR; ++i) {
    const float* x = t.x + i * t.x_stride;
    for (int j = 0; j < NR; ++j) {
      const float* w = t.w + j * t.depth;
      float acc[kLanes] = {};
      for (int64_t k0 = 0; k0 < t.depth; k0 += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const int64_t k = k0 + l;
          acc[l] = k < t.depth ? std::fma(x[k], w[k], acc[l]) : std::fma(0.0f, 0.0f, acc[l]);
        }
      }
      float out = ReduceLanes(acc);
      if (t.bias != nullptr) out = out + t.bias[j];
      t.y[i * t.y_stride + j] = out;
    }
  }
}

template <int MR, int NR>
struct PortableFamily {
  static constexpr int kMaxColumns = MR <= 4 ? 12 / MR : 3;
  static void Run(const MicroTile& t) {
    if constexpr (NR <= kMaxColumns) MicroPortable<MR, NR>(t);
  }
};
constexpr KernelTable kPortableTable =
    MakeTable<PortableFamily>(std::make_integer_sequence<int, kMaxRows>());
constexpr Isa kPortableIsa{LinearKernel::kPortable, &kPortableTable, 8, {0, 12, 6, 4, 3, 3, 3, 3, 3}};

#if LOCKSTEP_LINEAR_X86
#define LOCKSTEP_AVX2 __attribute__((target("avx2,fma")))
#define LOCKSTEP_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))

// Lanes 0..7 in `low`, 8..15 in `high`: ((s0 + s2) + (s1 + s3)) with s_l = t_l + t_{l+4},
// t_l = v_l + v_{l+8}.
LOCKSTEP_AVX2 inline float ReduceHalves(__m256 low, __m256 high) {
  const __m256 t = _mm256_add_ps(low, high);
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 u = _mm_add_ps(s, _mm_movehl_ps(s, s));      // s0 + s2, s1 + s3
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));  // (s0 + s2) + (s1 + s3)
}

LOCKSTEP_AVX2 inline __m256i TailMask(int64_t lanes) {  // the first `lanes` of 8 (clamped)
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(lanes, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// AVX2: a 16-lane accumulator is two ymm; MR * NR * 2 <= 12 of the 16 registers.
template <int MR, int NR>
LOCKSTEP_AVX2 void MicroAvx2(const MicroTile& t) {
  __m256 acc[MR][NR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
  const float* x = t.x;
  const float* w = t.w;
  const int64_t x_stride = t.x_stride;
  const int64_t depth = t.depth;
  const int64_t full = depth / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 wv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        wv[j] = _mm256_loadu_ps(w + j * depth + k + 8 * h);
        _mm_prefetch(reinterpret_cast<const char*>(w + (NR + j) * depth + k + 8 * h), _MM_HINT_T0);
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        __m256 xv = _mm256_loadu_ps(x + i * x_stride + k + 8 * h);
        asm("" : "+x"(xv));
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j][h] = _mm256_fmadd_ps(xv, wv[j], acc[i][j][h]);
      }
    }
  }
  if (full < depth) {  // the tail: lanes past K load 0 (and FMA 0 * 0, as the portable order)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i mask = TailMask(depth - full - 8 * h);
      __m256 wv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w + j * depth + full + 8 * h, mask);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m256 xv = _mm256_maskload_ps(x + i * x_stride + full + 8 * h, mask);
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j][h] = _mm256_fmadd_ps(xv, wv[j], acc[i][j][h]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      float out = ReduceHalves(acc[i][j][0], acc[i][j][1]);
      if (t.bias != nullptr) out = out + t.bias[j];
      t.y[i * t.y_stride + j] = out;
    }
  }
}

// AVX-512: a 16-lane accumulator is one zmm; MR * NR <= 24 of the 32 registers.
template <int MR, int NR>
LOCKSTEP_AVX512 void MicroAvx512(const MicroTile& t) {
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const float* x = t.x;
  const float* w = t.w;
  const int64_t x_stride = t.x_stride;
  const int64_t depth = t.depth;
  const int64_t full = depth / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      wv[j] = _mm512_loadu_ps(w + j * depth + k);
      // The next register tile's weight rows follow these in memory: fetch them now (a row
      // triple is too short a stream for the hardware prefetcher to ramp up on).
      _mm_prefetch(reinterpret_cast<const char*>(w + (NR + j) * depth + k), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      __m512 xv = _mm512_loadu_ps(x + i * x_stride + k);
      asm("" : "+v"(xv));  // one load per row, not one per FMA (keeps the loads below the FMAs)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (full < depth) {  // the tail, zero-filled as above
    const __mmask16 mask = static_cast<__mmask16>((1u << (depth - full)) - 1u);
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, w + j * depth + full);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * x_stride + full);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      float out = ReduceHalves(_mm512_extractf32x8_ps(acc[i][j], 0),
                               _mm512_extractf32x8_ps(acc[i][j], 1));
      if (t.bias != nullptr) out = out + t.bias[j];
      t.y[i * t.y_stride + j] = out;
    }
  }
}

template <int MR, int NR>
struct Avx2Family {
  static constexpr int kMaxColumns = MR <= 6 ? 6 / MR : 0;
  static void Run(const MicroTile& t) {
    if constexpr (NR <= kMaxColumns) MicroAvx2<MR, NR>(t);
  }
};
template <int MR, int NR>
struct Avx512Family {
  static constexpr int kMaxColumns = MR <= 2 ? 12 : 24 / MR;
  static void Run(const MicroTile& t) {
    if constexpr (NR <= kMaxColumns) MicroAvx512<MR, NR>(t);
  }
};
constexpr KernelTable kAvx2Table = MakeTable<Avx2Family>(std::make_integer_sequence<int, kMaxRows>());
constexpr KernelTable kAvx512Table =
    MakeTable<Avx512Family>(std::make_integer_sequence<int, kMaxRows>());
constexpr Isa kAvx2Isa{LinearKernel::kAvx2, &kAvx2Table, 6, {0, 6, 3, 2, 1, 1, 1, 0, 0}};
constexpr Isa kAvx512Isa{LinearKernel::kAvx512, &kAvx512Table, 8, {0, 12, 12, 8, 6, 4, 4, 3, 3}};
#endif  // LOCKSTEP_LINEAR_X86

const Isa& DetectIsa() {
#if LOCKSTEP_LINEAR_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return kAvx512Isa;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kAvx2Isa;
#endif
  return kPortableIsa;
}

const Isa& BestIsa() {
  static const Isa& isa = DetectIsa();
  return isa;
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

// -----------------------------------------------------------------------------
// Tiling: depends on M, N and K only (never on the ISA, so tile ranges mean the same
// everywhere). A column block of W is at most ~256 KB (stays in L2 while rows stream past),
// a multiple of 24 columns (every register-tile width divides it); decode-sized M is one row
// block of one-quantum column blocks, larger M blocks of 64 rows. Column blocks are halved
// (down to 24) while there are fewer than kMinTiles tiles, so that 2..16 threads all get work.
constexpr int64_t kColumnBlockBytes = 256 * 1024;
constexpr int64_t kColumnQuantum = 24;
constexpr int64_t kMaxColumnBlock = 192;
constexpr int64_t kSmallRows = 16, kRowBlock = 64;
constexpr int64_t kMinTiles = 16;

struct Tiling {
  int64_t row_block, column_block, num_row_blocks, num_column_blocks;
};

Tiling ChooseTiling(int64_t rows, int64_t out_features, int64_t in_features) {
  Tiling tiling;
  tiling.row_block = rows <= kSmallRows ? std::max<int64_t>(rows, 1) : kRowBlock;
  tiling.num_row_blocks = (rows + tiling.row_block - 1) / tiling.row_block;
  if (tiling.num_row_blocks == 1) {
    // Decode-sized M: no other row block reuses a column block from L2, so blocks are one
    // quantum wide, which spreads the columns over any number of threads evenly (within one
    // quantum; 72-column blocks left q_proj's 768 columns split 432 / 336 over two threads).
    tiling.column_block = kColumnQuantum;
    tiling.num_column_blocks = (out_features + kColumnQuantum - 1) / kColumnQuantum;
    return tiling;
  }
  const int64_t fit = kColumnBlockBytes / (4 * std::max<int64_t>(in_features, 1));
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
  return tiling;
}

void ComputeTile(const Isa& isa, const LinearProblem& p, const Tiling& tiling, int64_t tile) {
  const int64_t row_begin = (tile % tiling.num_row_blocks) * tiling.row_block;
  const int64_t row_end = std::min(p.rows, row_begin + tiling.row_block);
  const int64_t column_begin = (tile / tiling.num_row_blocks) * tiling.column_block;
  const int64_t column_end = std::min(p.out_features, column_begin + tiling.column_block);
  MicroTile t;
  t.x_stride = p.x_stride;
  t.depth = p.in_features;
  t.y_stride = p.y_stride;
  // Row groups outside (MR rows of x stay in L1), columns inside (the block's W from L2).
  for (int64_t row = row_begin; row < row_end; row += isa.main_rows) {
    const int rows = static_cast<int>(std::min<int64_t>(isa.main_rows, row_end - row));
    const int width = isa.columns_for_rows[rows];
    t.x = p.x + row * p.x_stride;
    for (int64_t column = column_begin; column < column_end; column += width) {
      const int columns = static_cast<int>(std::min<int64_t>(width, column_end - column));
      t.w = p.weight + column * p.in_features;
      t.bias = p.bias != nullptr ? p.bias + column : nullptr;
      t.y = p.y + row * p.y_stride + column;
      (*isa.table)[rows - 1][columns - 1](t);
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
  for (int64_t tile = std::max<int64_t>(tile_begin, 0); tile < tile_end; ++tile)
    ComputeTile(*isa, problem, tiling, tile);
  return true;
}

void LinearTiles(const LinearProblem& problem, int64_t tile_begin, int64_t tile_end) {
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
