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

template <int kVecs>
LOCKSTEP_TARGET_AVX512 void WeightedValuesAvx512Chunk(const ItemArgs& a,
                                                      int64_t i0, float l) {
  __m512 even[kVecs], odd[kVecs];
  for (int k = 0; k < kVecs; ++k) even[k] = odd[k] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 2 <= a.num_keys; j += 2) {
    const float* v0 = a.values + a.key_rows[j] * a.stride + i0;
    const float* v1 = a.values + a.key_rows[j + 1] * a.stride + i0;
    if (j + 9 < a.num_keys) {  // scattered paged rows: fetch 8 keys ahead
      const char* p0 = reinterpret_cast<const char*>(
          a.values + a.key_rows[j + 8] * a.stride + i0);
      const char* p1 = reinterpret_cast<const char*>(
          a.values + a.key_rows[j + 9] * a.stride + i0);
      for (int b = 0; b < kVecs * 64; b += 64) {
        _mm_prefetch(p0 + b, _MM_HINT_T0);
        _mm_prefetch(p1 + b, _MM_HINT_T0);
      }
    }
    const __m512 e0 = _mm512_set1_ps(a.scores[j]);
    const __m512 e1 = _mm512_set1_ps(a.scores[j + 1]);
    for (int k = 0; k < kVecs; ++k) {
      even[k] = _mm512_fmadd_ps(e0, _mm512_loadu_ps(v0 + 16 * k), even[k]);
      odd[k] = _mm512_fmadd_ps(e1, _mm512_loadu_ps(v1 + 16 * k), odd[k]);
    }
  }
  if (j < a.num_keys) {
    const float* v0 = a.values + a.key_rows[j] * a.stride + i0;
    const __m512 e0 = _mm512_set1_ps(a.scores[j]);
    for (int k = 0; k < kVecs; ++k) {
      even[k] = _mm512_fmadd_ps(e0, _mm512_loadu_ps(v0 + 16 * k), even[k]);
    }
  }
  const __m512 vl = _mm512_set1_ps(l);
  for (int k = 0; k < kVecs; ++k) {
    _mm512_storeu_ps(a.out + i0 + 16 * k,
                     _mm512_div_ps(_mm512_add_ps(even[k], odd[k]), vl));
  }
}

LOCKSTEP_TARGET_AVX2 void WeightedValuesAvx2(const ItemArgs& a, float l) {
  int64_t i = 0;
  for (; i + 32 <= a.d; i += 32) WeightedValuesAvx2Chunk<4>(a, i, l);
  for (; i + 8 <= a.d; i += 8) WeightedValuesAvx2Chunk<1>(a, i, l);
  WeightedValuesScalar(a, i, a.d, l);
}

LOCKSTEP_TARGET_AVX512 void WeightedValuesAvx512(const ItemArgs& a, float l) {
  int64_t i = 0;
  for (; i + 64 <= a.d; i += 64) WeightedValuesAvx512Chunk<4>(a, i, l);
  for (; i + 16 <= a.d; i += 16) WeightedValuesAvx512Chunk<1>(a, i, l);
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

LOCKSTEP_TARGET_AVX2 void AttendAvx2(const ItemArgs& a) {
  for (int64_t j = 0; j < a.num_keys; ++j) {
    a.scores[j] =
        DotAvx2(a.q, a.keys + a.key_rows[j] * a.stride, a.d) * a.scale;
  }
  const float l = SoftmaxAvx2(a.scores, a.num_keys);
  WeightedValuesAvx2(a, l);
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

// Scores of keys [j0, j0 + 16), d a multiple of 16.
LOCKSTEP_TARGET_AVX512 void SixteenScoresAvx512(const ItemArgs& a, int64_t j0) {
  const float* k[16];
  for (int kk = 0; kk < 16; ++kk)
    k[kk] = a.keys + a.key_rows[j0 + kk] * a.stride;
  // Paged rows are scattered: prefetch the next block's rows (no effect on the
  // arithmetic).
  const int64_t next_end = std::min(a.num_keys, j0 + 32);
  for (int64_t j = j0 + 16; j < next_end; ++j) {
    const char* row =
        reinterpret_cast<const char*>(a.keys + a.key_rows[j] * a.stride);
    for (int64_t b = 0; b < a.d * 4; b += 64)
      _mm_prefetch(row + b, _MM_HINT_T0);
  }
  __m512 acc[16];
  for (int kk = 0; kk < 16; ++kk) acc[kk] = _mm512_setzero_ps();
  for (int64_t i = 0; i < a.d; i += kLanes) {
    const __m512 q = _mm512_loadu_ps(a.q + i);
    for (int kk = 0; kk < 16; ++kk) {
      acc[kk] = _mm512_fmadd_ps(q, _mm512_loadu_ps(k[kk] + i), acc[kk]);
    }
  }
  const __m512 dots = ReduceSixteenDots(acc);
  _mm512_storeu_ps(a.scores + j0, _mm512_mul_ps(dots, _mm512_set1_ps(a.scale)));
}

LOCKSTEP_TARGET_AVX512 void AttendAvx512(const ItemArgs& a) {
  int64_t j = 0;
  if (a.d % kLanes == 0) {
    for (; j + 16 <= a.num_keys; j += 16) SixteenScoresAvx512(a, j);
  }
  for (; j < a.num_keys; ++j) {
    a.scores[j] =
        DotAvx512(a.q, a.keys + a.key_rows[j] * a.stride, a.d) * a.scale;
  }
  const float l = SoftmaxAvx512(a.scores, a.num_keys);
  WeightedValuesAvx512(a, l);
}

}  // namespace

void CausalAttentionItems(const AttentionProblem& problem, int64_t item_begin,
                          int64_t item_end) {
  const SimdLevel level = ActiveSimdLevel();
  const int64_t d = problem.head_dim;
  const int64_t group = problem.num_heads / problem.num_kv_heads;
  thread_local std::vector<float> scores;
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t query = item / problem.num_heads;
    const int64_t head = item % problem.num_heads;
    const int64_t kv_head = head / group;
    const int64_t num_keys = problem.first_position + query + 1;
    if (static_cast<int64_t>(scores.size()) < num_keys) scores.resize(num_keys);
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
        AttendAvx512(args);
        break;
      case SimdLevel::kAvx2:
        AttendAvx2(args);
        break;
      default:
        AttendPortable(args);
        break;
    }
  }
}

}  // namespace lockstep::kernels
