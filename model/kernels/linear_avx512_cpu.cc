// AVX-512 micro-kernels of the fixed-order linear (linear_microkernel.h): one zmm holds an
// output's 16 chains; a register tile is MR rows x NR columns of them (MR * NR <= 24 of the 32
// registers). Per 16 k: NR weight loads, MR loads of the packed x rows, MR * NR FMAs.
//
// The lane tree at the end runs over 16 outputs at once (Reduce16): the same adds, in the same
// order, per output as the contract's scalar tree, but three shuffles and an add per level
// instead of eight instructions per output.
#include "model/kernels/linear_microkernel.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define LOCKSTEP_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))

namespace lockstep::kernels::linear_internal {
namespace {

// Outputs of 16 accumulators a[0..15]: lane 4 * j + c of the result is a[4 * c + j]'s
// ((s0 + s2) + (s1 + s3)), with s_l = t_l + t_{l+4}, t_l = v_l + v_{l+8}.
LOCKSTEP_AVX512 inline __m512 Reduce16(const __m512* a) {
  __m512 t[8], s[4], u[2];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {  // t of a[2p] in quarters 0-1, of a[2p + 1] in quarters 2-3
    t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xEE));
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {  // quarter j: s0..s3 of a[4r + j]
    s[r] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0xDD));
  }
#pragma GCC unroll 2
  for (int z = 0; z < 2; ++z) {  // quarter j: u0, u1 of a[8z + j], then of a[8z + 4 + j]
    u[z] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * z], s[2 * z + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(s[2 * z], s[2 * z + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

template <int MR, int NR, int kPrefetch>
LOCKSTEP_AVX512 void ChunkAvx512(const ChunkTile& t) {
  constexpr int kCount = MR * NR;
  constexpr int kGroups = (kCount + 15) / 16;
  __m512 acc[kGroups * 16];
  if (t.first) {
#pragma GCC unroll 32
    for (int q = 0; q < kCount; ++q) acc[q] = _mm512_setzero_ps();
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j)
        acc[i * NR + j] = _mm512_load_ps(t.partial + (i * t.partial_stride + j) * kLanes);
  }
  const float* x = t.x;
  const float* w = t.w;
  const int64_t x_stride = t.x_stride;
  const int64_t w_stride = t.w_stride;
  const int64_t full = t.length / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      wv[j] = _mm512_loadu_ps(w + j * w_stride + k);
      // Streaming W from memory, the next register tile's weight rows follow these: fetch them
      // now (a row triple is too short a stream for the hardware prefetcher to ramp up on), into
      // L2 (T1): a T0 prefetch holds one of L1's few miss buffers until its line arrives, which
      // caps the lines in flight (AMD Zen 4, 1 thread, base decode matrices: b1 sweep 21.5 ->
      // 17.6 ms, b8 34-36 -> 26-27 ms with T1), or non-temporal where the CPU prefers it
      // (kPrefetchNta, LinearBlocking::stream_prefetch_nta).
      if constexpr (NR > 1) {
        PrefetchW<kPrefetch>(w + (NR + j) * w_stride + k);
        PrefetchL1<kPrefetch>(w + j * w_stride + k + kL1PrefetchFloats);
      } else {
        // One column: the weights are one sequential stream (rows are contiguous), fetched
        // kStreamPrefetchFloats ahead, running on into the next row at a row's end.
        PrefetchW<kPrefetch>(w + k + kStreamPrefetchFloats);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      __m512 xv = _mm512_load_ps(x + i * x_stride + k);
      asm("" : "+v"(xv));  // one load per row, not one per FMA (keeps the loads below the FMAs)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_fmadd_ps(xv, wv[j], acc[i * NR + j]);
    }
  }
  if (full < t.length) {  // the tail: lanes past K load 0 (and FMA 0 * 0, as the portable order)
    const __mmask16 mask = static_cast<__mmask16>((1u << (t.length - full)) - 1u);
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, w + j * w_stride + full);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * x_stride + full);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_fmadd_ps(xv, wv[j], acc[i * NR + j]);
    }
  }
  if (!t.last) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j)
        _mm512_store_ps(t.partial + (i * t.partial_stride + j) * kLanes, acc[i * NR + j]);
    return;
  }
#pragma GCC unroll 16
  for (int q = kCount; q < kGroups * 16; ++q) acc[q] = _mm512_setzero_ps();
  alignas(64) float out[kGroups * 16];
#pragma GCC unroll 2
  for (int g = 0; g < kGroups; ++g) _mm512_store_ps(out + 16 * g, Reduce16(acc + 16 * g));
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const int q = i * NR + j, r = q % 16;
      float value = out[q - r + 4 * (r % 4) + r / 4];
      if (t.bias != nullptr) value = value + t.bias[j];
      t.y[i * t.y_stride + j] = value;
    }
  }
}

template <int kPrefetch>
struct Avx512Families {
  template <int MR, int NR>
  struct Family {
    static constexpr int kMaxColumns = MR <= 2 ? 12 : (24 / MR > 4 ? 24 / MR : 4);
    static void Run(const ChunkTile& t) {
      if constexpr (NR <= kMaxColumns) ChunkAvx512<MR, NR, kPrefetch>(t);
    }
  };
};

constexpr KernelTable kAvx512Table = MakeTable<Avx512Families<kPrefetchNone>::Family>();
constexpr KernelTable kAvx512StreamingTable = MakeTable<Avx512Families<kPrefetchT1>::Family>();
constexpr KernelTable kAvx512StreamingNtaTable =
    MakeTable<Avx512Families<kPrefetchNta>::Family>();

}  // namespace

const Isa& Avx512Isa() {
  // Streaming, 5-8 rows take 4 columns (up to 32 accumulators, which with the weight and x
  // vectors outgrow the 32 registers: GCC 12 keeps five of 8 x 4 on the stack, a load and a
  // store each per 16 k): 7-8 rows x 3 columns left the FMA unit waiting on W (b8 sweep 20.5 ms
  // against 18.7 at 8 x 4, AMD Zen 4, 1 thread). The narrow tiles (LinearBlocking::
  // stream_narrow_tiles) take 3 for 7-8 rows, nothing spilled: with the L1 prefetch
  // (kL1PrefetchFloats) AMD EPYC Zen 5 swept the base decode matrices at 8 rows at 0.70-0.71 of
  // a plain read in them against 0.64-0.65 in 8 x 4 at 1 thread, 0.73-0.77 against 0.67-0.68 at
  // 2 (bench_linear_cold, two runs, 2026-12-07). 1-2 rows take one column: W is then read as
  // one sequential stream, row after row, the pattern memory serves fastest; the FMAs (one per
  // row and 16 weights) keep up with it. Several weight rows at once, however prefetched, ran
  // 15% slower (base decode matrices, 1 row: 1x12 15.3-15.8 ms, 1x1 13.2-13.4, plain read
  // 12.5-14).
  static constexpr Isa isa{LinearKernel::kAvx512,
                           "avx512",
                           &kAvx512Table,
                           &kAvx512StreamingTable,
                           &kAvx512StreamingNtaTable,
                           8,
                           8,
                           {0, 12, 12, 8, 6, 4, 4, 3, 3},
                           {0, 1, 1, 8, 6, 4, 4, 4, 4},
                           {0, 1, 1, 8, 6, 4, 4, 3, 3}};
  return isa;
}

}  // namespace lockstep::kernels::linear_internal

#endif  // __x86_64__
