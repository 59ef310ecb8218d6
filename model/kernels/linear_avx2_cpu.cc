// AVX2 micro-kernels of the fixed-order linear (linear_microkernel.h): an output's 16 chains are
// two ymm (lanes 0..7, 8..15); a register tile is MR rows x NR columns of them
// (MR * NR * 2 <= 12 of the 16 registers).
#include "model/kernels/linear_microkernel.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#define LOCKSTEP_AVX2 __attribute__((target("avx2,fma")))

namespace lockstep::kernels::linear_internal {
namespace {

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

template <int MR, int NR, int kPrefetch>
LOCKSTEP_AVX2 void ChunkAvx2(const ChunkTile& t) {
  __m256 acc[MR][NR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      if (t.first) {
        acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
      } else {
        const float* carried = t.partial + (i * t.partial_stride + j) * kLanes;
        acc[i][j][0] = _mm256_load_ps(carried);
        acc[i][j][1] = _mm256_load_ps(carried + 8);
      }
    }
  }
  const float* x = t.x;
  const float* w = t.w;
  const int64_t x_stride = t.x_stride;
  const int64_t w_stride = t.w_stride;
  const int64_t full = t.length / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 wv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        wv[j] = _mm256_loadu_ps(w + j * w_stride + k + 8 * h);
        if constexpr (NR > 1) {  // streaming W: the next tile's rows
          PrefetchW<kPrefetch>(w + (NR + j) * w_stride + k + 8 * h);
        } else if (h == 0) {  // one column: one sequential stream
          PrefetchW<kPrefetch>(w + k + kStreamPrefetchFloats);
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        __m256 xv = _mm256_load_ps(x + i * x_stride + k + 8 * h);
        asm("" : "+x"(xv));
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j][h] = _mm256_fmadd_ps(xv, wv[j], acc[i][j][h]);
      }
    }
  }
  if (full < t.length) {  // the tail: lanes past K load 0 (and FMA 0 * 0, as the portable order)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i mask = TailMask(t.length - full - 8 * h);
      __m256 wv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w + j * w_stride + full + 8 * h, mask);
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
      if (!t.last) {
        float* carried = t.partial + (i * t.partial_stride + j) * kLanes;
        _mm256_store_ps(carried, acc[i][j][0]);
        _mm256_store_ps(carried + 8, acc[i][j][1]);
        continue;
      }
      float out = ReduceHalves(acc[i][j][0], acc[i][j][1]);
      if (t.bias != nullptr) out = out + t.bias[j];
      t.y[i * t.y_stride + j] = out;
    }
  }
}

template <int kPrefetch>
struct Avx2Families {
  template <int MR, int NR>
  struct Family {
    static constexpr int kMaxColumns = MR <= 6 ? 6 / MR : 0;
    static void Run(const ChunkTile& t) {
      if constexpr (NR <= kMaxColumns) ChunkAvx2<MR, NR, kPrefetch>(t);
    }
  };
};

constexpr KernelTable kAvx2Table = MakeTable<Avx2Families<kPrefetchNone>::Family>();
constexpr KernelTable kAvx2StreamingTable = MakeTable<Avx2Families<kPrefetchT1>::Family>();
constexpr KernelTable kAvx2StreamingNtaTable = MakeTable<Avx2Families<kPrefetchNta>::Family>();

}  // namespace

const Isa& Avx2Isa() {
  // In cache, 3 rows x 2 columns: per 8 lanes of k, 2 weight and 3 x loads feed 6 FMAs, where
  // 6 x 1 took 7 loads (1 weight, 6 x) and left the FMA units waiting on the load ports; W
  // comes from L2 a third of the times x does. The AVX2 family on an AMD EPYC Zen 5 against
  // OpenBLAS's Haswell kernel (bench_linear_raw --kernel avx2, three alternated runs, 1 thread):
  // M = 512 q/o 0.74-0.85 -> 0.90-0.98, down 0.62-0.66 -> 0.70-0.79, M = 4096 down 0.64-0.74 ->
  // 0.92-0.97 (bench/README.md). 2 x 3 (3 weight loads) read W from L2 too often (0.46-0.74).
  // Streaming tiles (decode, W from memory once) keep 6 rows: a row group re-reads its weights,
  // and from memory where they were fetched non-temporally; 3 rows there were no better.
  static constexpr Isa isa{LinearKernel::kAvx2,
                           "avx2",
                           &kAvx2Table,
                           &kAvx2StreamingTable,
                           &kAvx2StreamingNtaTable,
                           3,
                           6,
                           {0, 6, 3, 2, 1, 1, 1, 0, 0},
                           {0, 1, 1, 2, 1, 1, 1, 0, 0},
                           {0, 1, 1, 2, 1, 1, 1, 0, 0}};
  return isa;
}

}  // namespace lockstep::kernels::linear_internal

#endif  // __x86_64__
