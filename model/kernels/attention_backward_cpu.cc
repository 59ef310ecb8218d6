// The causal attention backward's row passes (see attention_backward_cpu.h).
#include "model/kernels/attention_backward_cpu.h"

#include <algorithm>
#include <limits>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

int64_t Visible(const CausalRows& rows, int64_t row) {
  const int64_t query = row % rows.rows_per_matrix / rows.rows_per_query;
  return std::min(rows.length, rows.first_visible + query);
}

// ---- softmax of a row's first n entries, the rest zeroed

void SoftmaxRowPortable(float* s, int64_t n, int64_t length) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = DeterministicExp(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
  std::fill(s + n, s + length, 0.0f);
}

LOCKSTEP_TARGET_AVX2 void SoftmaxRowAvx2(float* s, int64_t n, int64_t length) {
  const int64_t body = n - n % 8;
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < body; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + j));
  float lanes[8];
  _mm256_storeu_ps(lanes, vm);
  float m = *std::max_element(lanes, lanes + 8);
  for (int64_t j = body; j < n; ++j) m = std::max(m, s[j]);
  vm = _mm256_set1_ps(m);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t j = 0; j < body; j += 8) {
    const __m256 e = ExpAvx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_storeu_ps(lanes, vsum);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  for (int64_t j = body; j < n; ++j) {
    s[j] = DeterministicExp(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t j = 0; j < body; j += 8) {
    _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), vinv));
  }
  for (int64_t j = body; j < n; ++j) s[j] *= inv;
  std::fill(s + n, s + length, 0.0f);
}

LOCKSTEP_TARGET_AVX512 void SoftmaxRowAvx512(float* s, int64_t n, int64_t length) {
  const int64_t body = n - n % 16;
  __m512 vm = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < body; j += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(s + j));
  float m = _mm512_reduce_max_ps(vm);
  for (int64_t j = body; j < n; ++j) m = std::max(m, s[j]);
  vm = _mm512_set1_ps(m);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t j = 0; j < body; j += 16) {
    const __m512 e = ExpAvx512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  float sum = _mm512_reduce_add_ps(vsum);
  for (int64_t j = body; j < n; ++j) {
    s[j] = DeterministicExp(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  const __m512 vinv = _mm512_set1_ps(inv);
  for (int64_t j = 0; j < body; j += 16) {
    _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), vinv));
  }
  for (int64_t j = body; j < n; ++j) s[j] *= inv;
  std::fill(s + n, s + length, 0.0f);
}

// ---- g_j = p_j * (g_j - p . g) over a row's first n entries, the rest zeroed

void SoftmaxGradRowPortable(const float* p, float* g, int64_t n, int64_t length) {
  float dot = 0.0f;
  for (int64_t j = 0; j < n; ++j) dot += p[j] * g[j];
  for (int64_t j = 0; j < n; ++j) g[j] = p[j] * (g[j] - dot);
  std::fill(g + n, g + length, 0.0f);
}

LOCKSTEP_TARGET_AVX2 void SoftmaxGradRowAvx2(const float* p, float* g, int64_t n,
                                             int64_t length) {
  const int64_t body = n - n % 8;
  __m256 vdot = _mm256_setzero_ps();
  for (int64_t j = 0; j < body; j += 8) {
    vdot = _mm256_fmadd_ps(_mm256_loadu_ps(p + j), _mm256_loadu_ps(g + j), vdot);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, vdot);
  float dot = 0.0f;
  for (float lane : lanes) dot += lane;
  for (int64_t j = body; j < n; ++j) dot += p[j] * g[j];
  const __m256 vd = _mm256_set1_ps(dot);
  for (int64_t j = 0; j < body; j += 8) {
    _mm256_storeu_ps(g + j, _mm256_mul_ps(_mm256_loadu_ps(p + j),
                                          _mm256_sub_ps(_mm256_loadu_ps(g + j), vd)));
  }
  for (int64_t j = body; j < n; ++j) g[j] = p[j] * (g[j] - dot);
  std::fill(g + n, g + length, 0.0f);
}

LOCKSTEP_TARGET_AVX512 void SoftmaxGradRowAvx512(const float* p, float* g, int64_t n,
                                                 int64_t length) {
  const int64_t body = n - n % 16;
  __m512 vdot = _mm512_setzero_ps();
  for (int64_t j = 0; j < body; j += 16) {
    vdot = _mm512_fmadd_ps(_mm512_loadu_ps(p + j), _mm512_loadu_ps(g + j), vdot);
  }
  float dot = _mm512_reduce_add_ps(vdot);
  for (int64_t j = body; j < n; ++j) dot += p[j] * g[j];
  const __m512 vd = _mm512_set1_ps(dot);
  for (int64_t j = 0; j < body; j += 16) {
    _mm512_storeu_ps(g + j, _mm512_mul_ps(_mm512_loadu_ps(p + j),
                                          _mm512_sub_ps(_mm512_loadu_ps(g + j), vd)));
  }
  for (int64_t j = body; j < n; ++j) g[j] = p[j] * (g[j] - dot);
  std::fill(g + n, g + length, 0.0f);
}

}  // namespace

void CausalSoftmaxRows(float* scores, const CausalRows& rows, int64_t row_begin,
                       int64_t row_end) {
  const SimdLevel level = ActiveSimdLevel();
  for (int64_t r = row_begin; r < row_end; ++r) {
    float* s = scores + r * rows.length;
    const int64_t n = Visible(rows, r);
    switch (level) {
      case SimdLevel::kAvx512:
        SoftmaxRowAvx512(s, n, rows.length);
        break;
      case SimdLevel::kAvx2:
        SoftmaxRowAvx2(s, n, rows.length);
        break;
      default:
        SoftmaxRowPortable(s, n, rows.length);
        break;
    }
  }
}

void SoftmaxGradRows(const float* probs, float* grad, const CausalRows& rows, int64_t row_begin,
                     int64_t row_end) {
  const SimdLevel level = ActiveSimdLevel();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* p = probs + r * rows.length;
    float* g = grad + r * rows.length;
    const int64_t n = Visible(rows, r);
    switch (level) {
      case SimdLevel::kAvx512:
        SoftmaxGradRowAvx512(p, g, n, rows.length);
        break;
      case SimdLevel::kAvx2:
        SoftmaxGradRowAvx2(p, g, n, rows.length);
        break;
      default:
        SoftmaxGradRowPortable(p, g, n, rows.length);
        break;
    }
  }
}

}  // namespace lockstep::kernels
