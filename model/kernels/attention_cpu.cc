// Batch-invariant causal attention (see attention_cpu.h).
//
// One routine per (query, head) item, the same for training, paged prefill and
// paged decode. With d = head_dim, keys j = 0 .. p (p = the query's position),
// all fp32:
//   dot_j  = q . k_j         canonical 16-lane order over d: acc[i % 16] =
//   fma(q_i, k_ji,
//                            acc[i % 16]) in increasing i, then the tree acc[l]
//                            += acc[l + s], s = 8, 4, 2, 1
//   s_j    = dot_j * scale
//   m      = max_j s_j       canonical 16-lane order over j (a > b ? a : b),
//   then the tree e_j    = exp(s_j - m)    DeterministicExp / ExpAvx2 /
//   ExpAvx512 (identical bits) l      = sum_j e_j       canonical 16-lane order
//   over j, then the tree o      = o_even + o_odd, o_even = sum over even j of
//   e_j * v_j (fma, in increasing j),
//                            o_odd likewise over odd j (two chains: more ILP,
//                            fixed by j)
//   out    = o / l
// Every order depends only on the key index j and d, so an item's bits never
// depend on which other items the call computes, on the cache layout
// (key_rows), or on the SIMD level.
#include "model/kernels/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

constexpr int kLanes =
    16;  // canonical lanes for the dot over d and the reductions over keys

struct ItemArgs {
  const float* q;     // [d]
  const float* keys;  // key row r of this kv head: keys + key_rows[r] * stride
  const float* values;
  int64_t stride;
  const int64_t* key_rows;
  int64_t num_keys;  // p + 1
  int64_t d;
  float scale;
  float* scores;  // scratch [num_keys]
  float* out;     // [d]
};

// ---- dot over d
// ----------------------------------------------------------------------------------

float DotPortable(const float* q, const float* k, int64_t d) {
  float acc[kLanes] = {};
  for (int64_t i = 0; i < d; ++i)
    acc[i % kLanes] = std::fma(q[i], k[i], acc[i % kLanes]);
  return SumTree(acc, kLanes);
}

LOCKSTEP_TARGET_AVX2 float DotAvx2(const float* q, const float* k, int64_t d) {
  __m256 lo = _mm256_setzero_ps();  // lanes 0..7
  __m256 hi = _mm256_setzero_ps();  // lanes 8..15
  const int64_t body = d - d % kLanes;
  for (int64_t i = 0; i < body; i += kLanes) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8),
                         hi);
  }
  if (body != d) {
    float acc[kLanes];
    _mm256_storeu_ps(acc, lo);
    _mm256_storeu_ps(acc + 8, hi);
    for (int64_t i = body; i < d; ++i)
      acc[i - body] = std::fma(q[i], k[i], acc[i - body]);
    return SumTree(acc, kLanes);
  }
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 =
      _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

LOCKSTEP_TARGET_AVX512 float DotAvx512(const float* q, const float* k,
                                       int64_t d) {
  __m512 acc = _mm512_setzero_ps();
  const int64_t body = d - d % kLanes;
  for (int64_t i = 0; i < body; i += kLanes) {
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(k + i), acc);
  }
  if (body != d) {
    float lanes[kLanes];
    _mm512_storeu_ps(lanes, acc);
    for (int64_t i = body; i < d; ++i)
      lanes[i - body] = std::fma(q[i], k[i], lanes[i - body]);
    return SumTree(lanes, kLanes);
  }
  const __m256 lo = _mm512_castps512_ps256(acc);
  const __m256 hi =
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 =
      _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// ---- softmax statistics over keys (scores -> exp, returns l)
// --------------------------------------

// Scalar continuation shared by every level: keys [body, n) into the 16-lane
// arrays, then trees.
float MaxFinish(const float* s, int64_t body, int64_t n, float* acc) {
  for (int64_t j = body; j < n; ++j)
    acc[j % kLanes] = MaxOf(acc[j % kLanes], s[j]);
  return MaxTree(acc, kLanes);
}

float ExpSumFinish(float* s, int64_t body, int64_t n, float m, float* acc) {
  for (int64_t j = body; j < n; ++j) {
    s[j] = DeterministicExp(s[j] - m);
    acc[j % kLanes] = acc[j % kLanes] + s[j];
  }
  return SumTree(acc, kLanes);
}

float SoftmaxPortable(float* s, int64_t n) {
  float acc[kLanes];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  const float m = MaxFinish(s, 0, n, acc);
  for (float& a : acc) a = 0.0f;
  return ExpSumFinish(s, 0, n, m, acc);
}

LOCKSTEP_TARGET_AVX2 float SoftmaxAvx2(float* s, int64_t n) {
  const int64_t body = n - n % kLanes;
  float acc[kLanes];
  __m256 lo = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 hi = lo;
  for (int64_t j = 0; j < body; j += kLanes) {
    lo = _mm256_max_ps(lo, _mm256_loadu_ps(s + j));
    hi = _mm256_max_ps(hi, _mm256_loadu_ps(s + j + 8));
  }
  _mm256_storeu_ps(acc, lo);
  _mm256_storeu_ps(acc + 8, hi);
  const float m = MaxFinish(s, body, n, acc);
  const __m256 vm = _mm256_set1_ps(m);
  lo = _mm256_setzero_ps();
  hi = _mm256_setzero_ps();
  for (int64_t j = 0; j < body; j += kLanes) {
    const __m256 e_lo = ExpAvx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    const __m256 e_hi = ExpAvx2(_mm256_sub_ps(_mm256_loadu_ps(s + j + 8), vm));
    _mm256_storeu_ps(s + j, e_lo);
    _mm256_storeu_ps(s + j + 8, e_hi);
    lo = _mm256_add_ps(lo, e_lo);
    hi = _mm256_add_ps(hi, e_hi);
  }
  _mm256_storeu_ps(acc, lo);
  _mm256_storeu_ps(acc + 8, hi);
  return ExpSumFinish(s, body, n, m, acc);
}

LOCKSTEP_TARGET_AVX512 float SoftmaxAvx512(float* s, int64_t n) {
  const int64_t body = n - n % kLanes;
  float acc[kLanes];
  __m512 a = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < body; j += kLanes)
    a = _mm512_max_ps(a, _mm512_loadu_ps(s + j));
  _mm512_storeu_ps(acc, a);
  const float m = MaxFinish(s, body, n, acc);
  const __m512 vm = _mm512_set1_ps(m);
  a = _mm512_setzero_ps();
  for (int64_t j = 0; j < body; j += kLanes) {
    const __m512 e = ExpAvx512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    a = _mm512_add_ps(a, e);
  }
  _mm512_storeu_ps(acc, a);
  return ExpSumFinish(s, body, n, m, acc);
}

// ---- weighted sum of values, dims [i0, i1)
// -------------------------------------------------------

void WeightedValuesScalar(const ItemArgs& a, int64_t i0, int64_t i1, float l) {
  for (int64_t i = i0; i < i1; ++i) {
    float even = 0.0f, odd = 0.0f;
    int64_t j = 0;
    for (; j + 2 <= a.num_keys; j += 2) {
      even =
          std::fma(a.scores[j], a.values[a.key_rows[j] * a.stride + i], even);
      odd = std::fma(a.scores[j + 1],
                     a.values[a.key_rows[j + 1] * a.stride + i], odd);
    }
    if (j < a.num_keys)
      even =
          std::fma(a.scores[j], a.values[a.key_rows[j] * a.stride + i], even);
    a.out[i] = (even + odd) / l;
  }
}

// kVecs vectors of 8 dims starting at i0, two key-parity chains each.
template <int kVecs>
LOCKSTEP_TARGET_AVX2 void WeightedValuesAvx2Chunk(const ItemArgs& a, int64_t i0,
                                                  float l) {
  __m256 even[kVecs], odd[kVecs];
  for (int k = 0; k < kVecs; ++k) even[k] = odd[k] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 2 <= a.num_keys; j += 2) {
    const float* v0 = a.values + a.key_rows[j] * a.stride + i0;
    const float* v1 = a.values + a.key_rows[j + 1] * a.stride + i0;
    const __m256 e0 = _mm256_set1_ps(a.scores[j]);
    const __m256 e1 = _mm256_set1_ps(a.scores[j + 1]);
    for (int k = 0; k < kVecs; ++k) {
      even[k] = _mm256_fmadd_ps(e0, _mm256_loadu_ps(v0 + 8 * k), even[k]);
      odd[k] = _mm256_fmadd_ps(e1, _mm256_loadu_ps(v1 + 8 * k), odd[k]);
    }
  }
  if (j < a.num_keys) {
    const float* v0 = a.values + a.key_rows[j] * a.stride + i0;
    const __m256 e0 = _mm256_set1_ps(a.scores[j]);
    for (int k = 0; k < kVecs; ++k)
      even[k] = _mm256_fmadd_ps(e0, _mm256_loadu_ps(v0 + 8 * k), even[k]);
  }
  const __m256 vl = _mm256_set1_ps(l);
  for (int k = 0; k < kVecs; ++k) {
    _mm256_storeu_ps(a.out + i0 + 8 * k,
                     _mm256_div_ps(_mm256_add_ps(even[k], odd[k]), vl));
  }
}

LOCKSTEP_TARGET_AVX2 void WeightedValuesAvx2(const ItemArgs& a, float l) {
  int64_t i = 0;
  for (; i + 32 <= a.d; i += 32) WeightedValuesAvx2Chunk<4>(a, i, l);
  for (; i + 8 <= a.d; i += 8) WeightedValuesAvx2Chunk<1>(a, i, l);
  WeightedValuesScalar(a, i, a.d, l);
}

// ---- one item
// ------------------------------------------------------------------------------------

void AttendPortable(const ItemArgs& a) {
  for (int64_t j = 0; j < a.num_keys; ++j) {
    a.scores[j] =
        DotPortable(a.q, a.keys + a.key_rows[j] * a.stride, a.d) * a.scale;
  }
  const float l = SoftmaxPortable(a.scores, a.num_keys);
  WeightedValuesScalar(a, 0, a.d, l);
}


// The canonical tree (lanes l + l+8, then +4, +2, +1) of 16 keys' 16-lane
// accumulators at once: each step adds the same lane pairs as DotAvx512's
// per-key tree, but two to eight keys share one shuffle and add. Returns the 16
// dot products in key order.
LOCKSTEP_TARGET_AVX512 __m512 ReduceSixteenDots(const __m512* acc) {
  // Step 8: [A0-7 | B0-7] + [A8-15 | B8-15] per pair (a, b) = (2k, 2k+1).
  __m512 r8[8];
  for (int k = 0; k < 8; ++k) {
    const __m512 lo =
        _mm512_shuffle_f32x4(acc[2 * k], acc[2 * k + 1], 0x44);  // A0 A1 B0 B1
    const __m512 hi =
        _mm512_shuffle_f32x4(acc[2 * k], acc[2 * k + 1], 0xEE);  // A2 A3 B2 B3
    r8[k] = _mm512_add_ps(lo, hi);
  }
  // Step 4: 128-bit blocks [A'0-3, A'4-7, B'0-3, B'4-7] -> [A'', B'', C'', D'']
  // (4 lanes each).
  __m512 r4[4];
  for (int k = 0; k < 4; ++k) {
    const __m512 lo =
        _mm512_shuffle_f32x4(r8[2 * k], r8[2 * k + 1], 0x88);  // blocks 0,2,0,2
    const __m512 hi =
        _mm512_shuffle_f32x4(r8[2 * k], r8[2 * k + 1], 0xDD);  // blocks 1,3,1,3
    r4[k] = _mm512_add_ps(lo, hi);
  }
  // Step 2 (within 128-bit blocks): [x0 x1 x2 x3], [y0 y1 y2 y3] -> [x0+x2,
  // x1+x3, y0+y2, y1+y3].
  __m512 r2[2];
  for (int k = 0; k < 2; ++k) {
    const __m512 lo = _mm512_shuffle_ps(r4[2 * k], r4[2 * k + 1], 0x44);
    const __m512 hi = _mm512_shuffle_ps(r4[2 * k], r4[2 * k + 1], 0xEE);
    r2[k] = _mm512_add_ps(lo, hi);
  }
  // Step 1: [x0 x1 y0 y1], [z0 z1 w0 w1] -> [x0+x1, y0+y1, z0+z1, w0+w1].
  const __m512 lo = _mm512_shuffle_ps(r2[0], r2[1], 0x88);
  const __m512 hi = _mm512_shuffle_ps(r2[0], r2[1], 0xDD);
  const __m512 dots = _mm512_add_ps(lo, hi);
  // Lane 4 * block + pos holds key 4 * pos + block (keys a..p laid out as
  // traced above).
  const __m512i order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, dots);
}

// Scores of 16 keys (rows k[0..15]) for one head, d a multiple of 16.
LOCKSTEP_TARGET_AVX512 void SixteenScoresAvx512(const float* const* k,
                                                const float* q, int64_t d,
                                                float scale, float* scores) {
  __m512 acc[16];
  for (int kk = 0; kk < 16; ++kk) acc[kk] = _mm512_setzero_ps();
  for (int64_t i = 0; i < d; i += kLanes) {
    const __m512 qi = _mm512_loadu_ps(q + i);
    for (int kk = 0; kk < 16; ++kk) {
      acc[kk] = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k[kk] + i), acc[kk]);
    }
  }
  _mm512_storeu_ps(
      scores, _mm512_mul_ps(ReduceSixteenDots(acc), _mm512_set1_ps(scale)));
}

// Adds keys [0, n) of one key block (rows v[t] + i0, weights e[t]) into one
// head's even/odd accumulators for dims [i0, i0 + 16 * kVecs). The block
// starts at an even key index, so local parity is the global parity.
template <int kVecs>
LOCKSTEP_TARGET_AVX512 void ValueBlockAvx512(const float* const* v, int64_t i0,
                                             const float* e, int64_t n,
                                             float* even_acc, float* odd_acc) {
  __m512 even[kVecs], odd[kVecs];
  for (int k = 0; k < kVecs; ++k) {
    even[k] = _mm512_loadu_ps(even_acc + 16 * k);
    odd[k] = _mm512_loadu_ps(odd_acc + 16 * k);
  }
  int64_t t = 0;
  for (; t + 2 <= n; t += 2) {
    const __m512 e0 = _mm512_set1_ps(e[t]);
    const __m512 e1 = _mm512_set1_ps(e[t + 1]);
    for (int k = 0; k < kVecs; ++k) {
      even[k] =
          _mm512_fmadd_ps(e0, _mm512_loadu_ps(v[t] + i0 + 16 * k), even[k]);
      odd[k] =
          _mm512_fmadd_ps(e1, _mm512_loadu_ps(v[t + 1] + i0 + 16 * k), odd[k]);
    }
  }
  if (t < n) {
    const __m512 e0 = _mm512_set1_ps(e[t]);
    for (int k = 0; k < kVecs; ++k) {
      even[k] =
          _mm512_fmadd_ps(e0, _mm512_loadu_ps(v[t] + i0 + 16 * k), even[k]);
    }
  }
  for (int k = 0; k < kVecs; ++k) {
    _mm512_storeu_ps(even_acc + 16 * k, even[k]);
    _mm512_storeu_ps(odd_acc + 16 * k, odd[k]);
  }
}

LOCKSTEP_TARGET_AVX512 void ValueBlockDispatchAvx512(int vecs,
                                                     const float* const* v,
                                                     int64_t i0, const float* e,
                                                     int64_t n, float* even_acc,
                                                     float* odd_acc) {
  switch (vecs) {
    case 8:
      ValueBlockAvx512<8>(v, i0, e, n, even_acc, odd_acc);
      break;
    case 7:
      ValueBlockAvx512<7>(v, i0, e, n, even_acc, odd_acc);
      break;
    case 6:
      ValueBlockAvx512<6>(v, i0, e, n, even_acc, odd_acc);
      break;
    case 5:
      ValueBlockAvx512<5>(v, i0, e, n, even_acc, odd_acc);
      break;
    case 4:
      ValueBlockAvx512<4>(v, i0, e, n, even_acc, odd_acc);
      break;
    case 3:
      ValueBlockAvx512<3>(v, i0, e, n, even_acc, odd_acc);
      break;
    case 2:
      ValueBlockAvx512<2>(v, i0, e, n, even_acc, odd_acc);
      break;
    default:
      ValueBlockAvx512<1>(v, i0, e, n, even_acc, odd_acc);
      break;
  }
}

// Into L2 (T1): a T0 prefetch holds one of L1's few miss buffers until its line arrives, and
// the next block's rows come from memory at decode (the weights stream through L3 between two
// layers' reads of the cache): ~19% of this kernel's samples sat on the T0 prefetches (perf,
// bench_generator b8, AMD Zen 4); with T1 the kernel's time against the decode linear's fell by
// a third.
// Rows kRowsAhead ahead of the block in use (three blocks), the first ones before the loop: one
// block ahead, the rows were late at decode; bench_model --decode-op-times, b8, AMD EPYC Zen 5,
// 2 threads, four alternated pairs: attention 1.041-1.088 ms a step -> 1.021-1.078 (2026-12-07).
constexpr int64_t kRowsAhead = 48;

void PrefetchRows(const float* base, const int64_t* key_rows, int64_t stride,
                  int64_t begin, int64_t end, int64_t d) {
  for (int64_t j = begin; j < end; ++j) {
    const char* row =
        reinterpret_cast<const char*>(base + key_rows[j] * stride);
    for (int64_t b = 0; b < d * 4; b += 64) _mm_prefetch(row + b, _MM_HINT_T1);
  }
}

// Scores of 4 keys (rows k[0..3]) for one head, d a multiple of 16: DotAvx2's chains, and its
// tree for the four at once (lanes l + l+8, then + l+4, then (s0 + s2) + (s1 + s3)): the same adds,
// two keys to a shuffle. scores[0..3] = dot * scale, the bits DotAvx2(...) * scale gives.
LOCKSTEP_TARGET_AVX2 void FourScoresAvx2(const float* const* k, const float* q, int64_t d,
                                         float scale, float* scores) {
  __m256 lo[4], hi[4];
  for (int kk = 0; kk < 4; ++kk) lo[kk] = hi[kk] = _mm256_setzero_ps();
  for (int64_t i = 0; i < d; i += kLanes) {
    const __m256 q_lo = _mm256_loadu_ps(q + i);
    const __m256 q_hi = _mm256_loadu_ps(q + i + 8);
    for (int kk = 0; kk < 4; ++kk) {
      lo[kk] = _mm256_fmadd_ps(q_lo, _mm256_loadu_ps(k[kk] + i), lo[kk]);
      hi[kk] = _mm256_fmadd_ps(q_hi, _mm256_loadu_ps(k[kk] + i + 8), hi[kk]);
    }
  }
  __m256 t[4];  // t_l = v_l + v_{l+8}, lanes 0..7 of each key
  for (int kk = 0; kk < 4; ++kk) t[kk] = _mm256_add_ps(lo[kk], hi[kk]);
  // s_l = t_l + t_{l+4}: [A s0-3 | B s0-3] and [C s0-3 | D s0-3].
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(t[0], t[1], 0x20),
                                  _mm256_permute2f128_ps(t[0], t[1], 0x31));
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(t[2], t[3], 0x20),
                                  _mm256_permute2f128_ps(t[2], t[3], 0x31));
  // u0 = s0 + s2, u1 = s1 + s3: [A u0 u1, C u0 u1 | B u0 u1, D u0 u1].
  const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  // u0 + u1: [A, C, A, C | B, D, B, D].
  const __m256 dots = _mm256_add_ps(_mm256_shuffle_ps(u, u, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(u, u, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m128 ac = _mm256_castps256_ps128(dots), bd = _mm256_extractf128_ps(dots, 1);
  const __m128 abcd = _mm_unpacklo_ps(ac, bd);  // A, B, C, D
  _mm_storeu_ps(scores, _mm_mul_ps(abcd, _mm_set1_ps(scale)));
}

// AVX2's run of heads that share a kv head, as AVX-512's below: the scores of 4 keys at a time
// for every head while their rows sit in L1, with the next rows prefetched; then per head
// SoftmaxAvx2 and WeightedValuesAvx2. Per head the arithmetic is AttendPortable's, as at every
// level. One head at a time (per-key DotAvx2, no grouping) took 13.8-15.1 ms for a 512-token
// prefill with 12/4 heads of 64 and this 10.8-12.5 (bench_misc_kernels --only attention, AMD EPYC
// Zen 5 with AVX2 forced, four alternated runs).
LOCKSTEP_TARGET_AVX2 void AttendGroupAvx2(const ItemArgs& a, int64_t num_group_heads,
                                          int64_t score_stride) {
  const int64_t n = a.num_keys, d = a.d;
  int64_t j = 0;
  PrefetchRows(a.keys, a.key_rows, a.stride, 0, std::min(n, kRowsAhead), d);
  if (d % kLanes == 0) {
    const float* rows[4];
    for (; j + 4 <= n; j += 4) {
      for (int t = 0; t < 4; ++t) rows[t] = a.keys + a.key_rows[j + t] * a.stride;
      PrefetchRows(a.keys, a.key_rows, a.stride, std::min(n, j + kRowsAhead),
                   std::min(n, j + kRowsAhead + 4), d);
      for (int64_t h = 0; h < num_group_heads; ++h) {
        FourScoresAvx2(rows, a.q + h * d, d, a.scale, a.scores + h * score_stride + j);
      }
    }
  }
  for (; j < n; ++j) {
    const float* row = a.keys + a.key_rows[j] * a.stride;
    for (int64_t h = 0; h < num_group_heads; ++h) {
      a.scores[h * score_stride + j] = DotAvx2(a.q + h * d, row, d) * a.scale;
    }
  }
  PrefetchRows(a.values, a.key_rows, a.stride, 0, std::min(n, kRowsAhead), d);
  for (int64_t h = 0; h < num_group_heads; ++h) {
    ItemArgs head = a;
    head.q = a.q + h * d;
    head.scores = a.scores + h * score_stride;
    head.out = a.out + h * d;
    WeightedValuesAvx2(head, SoftmaxAvx2(head.scores, n));
  }
}

// The heads [0, num_group_heads) of one query that share a kv head, in one
// pass over the keys: each 16-key block of K (then of V) is loaded once and
// used by every head while it sits in L1. Per head the arithmetic is exactly
// the per-item order documented at the top (16-key blocks for the scores, the
// even/odd fma chains for V), so grouping never changes bits.
// a.q / a.out / a.scores are head 0's; head h is at +h*d, +h*d,
// +h*score_stride. acc_scratch: [num_group_heads, 2, d] floats, sums:
// [num_group_heads].
LOCKSTEP_TARGET_AVX512 void AttendGroupAvx512(const ItemArgs& a,
                                              int64_t num_group_heads,
                                              int64_t score_stride,
                                              float* acc_scratch, float* sums) {
  const int64_t n = a.num_keys, d = a.d;
  const float* rows[16];
  int64_t j = 0;
  PrefetchRows(a.keys, a.key_rows, a.stride, 0, std::min(n, kRowsAhead), d);
  if (d % kLanes == 0) {
    for (; j + 16 <= n; j += 16) {
      for (int t = 0; t < 16; ++t)
        rows[t] = a.keys + a.key_rows[j + t] * a.stride;
      PrefetchRows(a.keys, a.key_rows, a.stride, std::min(n, j + kRowsAhead),
                   std::min(n, j + kRowsAhead + 16), d);
      for (int64_t h = 0; h < num_group_heads; ++h) {
        SixteenScoresAvx512(rows, a.q + h * d, d, a.scale,
                            a.scores + h * score_stride + j);
      }
    }
  }
  for (; j < n; ++j) {
    const float* row = a.keys + a.key_rows[j] * a.stride;
    for (int64_t h = 0; h < num_group_heads; ++h) {
      a.scores[h * score_stride + j] = DotAvx512(a.q + h * d, row, d) * a.scale;
    }
  }
  PrefetchRows(a.values, a.key_rows, a.stride, 0, std::min(n, kRowsAhead), d);
  for (int64_t h = 0; h < num_group_heads; ++h) {
    sums[h] = SoftmaxAvx512(a.scores + h * score_stride, n);
  }

  const int64_t d16 = d - d % kLanes;  // vector dims; the rest below
  std::fill(acc_scratch, acc_scratch + num_group_heads * 2 * d16, 0.0f);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t block = std::min<int64_t>(16, n - j0);
    for (int t = 0; t < block; ++t)
      rows[t] = a.values + a.key_rows[j0 + t] * a.stride;
    PrefetchRows(a.values, a.key_rows, a.stride, std::min(n, j0 + kRowsAhead),
                 std::min(n, j0 + kRowsAhead + 16), d);
    for (int64_t h = 0; h < num_group_heads; ++h) {
      float* even = acc_scratch + h * 2 * d16;
      for (int64_t i0 = 0; i0 < d16; i0 += 128) {
        const int vecs =
            static_cast<int>(std::min<int64_t>(8, (d16 - i0) / 16));
        ValueBlockDispatchAvx512(vecs, rows, i0,
                                 a.scores + h * score_stride + j0, block,
                                 even + i0, even + d16 + i0);
      }
    }
  }
  for (int64_t h = 0; h < num_group_heads; ++h) {
    const float* even = acc_scratch + h * 2 * d16;
    const __m512 vl = _mm512_set1_ps(sums[h]);
    float* out = a.out + h * d;
    for (int64_t i = 0; i < d16; i += 16) {
      const __m512 o = _mm512_add_ps(_mm512_loadu_ps(even + i),
                                     _mm512_loadu_ps(even + d16 + i));
      _mm512_storeu_ps(out + i, _mm512_div_ps(o, vl));
    }
    if (d16 < d) {
      ItemArgs head = a;
      head.q = a.q + h * d;
      head.scores = a.scores + h * score_stride;
      head.out = out;
      WeightedValuesScalar(head, d16, d, sums[h]);
    }
  }
}

}  // namespace

void CausalAttentionItems(const AttentionProblem& problem, int64_t item_begin,
                          int64_t item_end) {
  const SimdLevel level = ActiveSimdLevel();
  const int64_t d = problem.head_dim;
  const int64_t group = problem.num_heads / problem.num_kv_heads;
  thread_local std::vector<float> scores, acc_scratch, sums;
  for (int64_t item = item_begin; item < item_end;) {
    const int64_t query = item / problem.num_heads;
    const int64_t head = item % problem.num_heads;
    const int64_t kv_head = head / group;
    const int64_t num_keys = problem.first_position + query + 1;
    // AVX-512 and AVX2 take the run of this query's heads that share kv_head
    // (and lie in the range) together; the portable level goes one head at a
    // time.
    const int64_t run =
        level != SimdLevel::kPortable
            ? std::min(item_end - item, (kv_head + 1) * group - head)
            : 1;
    const int64_t score_stride = (num_keys + 15) / 16 * 16;
    if (static_cast<int64_t>(scores.size()) < run * score_stride) {
      scores.resize(run * score_stride);
    }
    ItemArgs args;
    args.q = problem.q + item * d;
    args.keys = problem.keys + kv_head * d;
    args.values = problem.values + kv_head * d;
    args.stride = problem.kv_row_stride;
    args.key_rows = problem.key_rows;
    args.num_keys = num_keys;
    args.d = d;
    args.scale = problem.scale;
    args.scores = scores.data();
    args.out = problem.out + item * d;
    switch (level) {
      case SimdLevel::kAvx512:
        if (static_cast<int64_t>(acc_scratch.size()) < run * 2 * d) {
          acc_scratch.resize(run * 2 * d);
        }
        if (static_cast<int64_t>(sums.size()) < run) sums.resize(run);
        AttendGroupAvx512(args, run, score_stride, acc_scratch.data(),
                          sums.data());
        break;
      case SimdLevel::kAvx2:
        AttendGroupAvx2(args, run, score_stride);
        break;
      default:
        AttendPortable(args);
        break;
    }
    item += run;
  }
}

}  // namespace lockstep::kernels
