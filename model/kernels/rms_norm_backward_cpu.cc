// RMSNorm's gradients (see rms_norm_backward_cpu.h).
#include "model/kernels/rms_norm_backward_cpu.h"

#include <cmath>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {
namespace {

constexpr int kPartials = 16;  // interleaved partial sums of a row's reductions

// The loops the compiler vectorises, inlined into one function per SIMD level.
inline __attribute__((always_inline)) void BackwardRows(
    const float* x, const float* weight, const float* grad_y, float* grad_x,
    float* grad_w_acc, int64_t dim, float eps, int64_t row_begin,
    int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * dim;
    const float* gr = grad_y + r * dim;
    float* dxr = grad_x + r * dim;
    float squares[kPartials] = {}, dots[kPartials] = {};
    int64_t i = 0;
    for (; i + kPartials <= dim; i += kPartials) {
      for (int l = 0; l < kPartials; ++l) {
        squares[l] += xr[i + l] * xr[i + l];
        dots[l] += gr[i + l] * weight[i + l] * xr[i + l];
      }
    }
    for (; i < dim; ++i) {
      squares[0] += xr[i] * xr[i];
      dots[0] += gr[i] * weight[i] * xr[i];
    }
    float sum_squares = 0.0f, sum_dots = 0.0f;
    for (int l = 0; l < kPartials; ++l) {
      sum_squares += squares[l];
      sum_dots += dots[l];
    }
    const float n = static_cast<float>(dim);
    const float inv = 1.0f / std::sqrt(sum_squares / n + eps);
    const float c = inv * inv * inv * sum_dots / n;
    for (i = 0; i < dim; ++i) {
      dxr[i] = inv * (gr[i] * weight[i]) - xr[i] * c;
      grad_w_acc[i] += gr[i] * xr[i] * inv;
    }
  }
}

void BackwardRowsPortable(const float* x, const float* weight,
                          const float* grad_y, float* grad_x,
                          float* grad_w_acc, int64_t dim, float eps,
                          int64_t row_begin, int64_t row_end) {
  BackwardRows(x, weight, grad_y, grad_x, grad_w_acc, dim, eps, row_begin,
               row_end);
}

LOCKSTEP_TARGET_AVX2 void BackwardRowsAvx2(const float* x, const float* weight,
                                           const float* grad_y, float* grad_x,
                                           float* grad_w_acc, int64_t dim,
                                           float eps, int64_t row_begin,
                                           int64_t row_end) {
  BackwardRows(x, weight, grad_y, grad_x, grad_w_acc, dim, eps, row_begin,
               row_end);
}

LOCKSTEP_TARGET_AVX512 void BackwardRowsAvx512(
    const float* x, const float* weight, const float* grad_y, float* grad_x,
    float* grad_w_acc, int64_t dim, float eps, int64_t row_begin,
    int64_t row_end) {
  BackwardRows(x, weight, grad_y, grad_x, grad_w_acc, dim, eps, row_begin,
               row_end);
}

}  // namespace

void RmsNormBackwardRows(const float* x, const float* weight,
                         const float* grad_y, float* grad_x, float* grad_w_acc,
                         int64_t dim, double eps, int64_t row_begin,
                         int64_t row_end) {
  const float eps_f = static_cast<float>(eps);
  switch (ActiveSimdLevel()) {
    case SimdLevel::kAvx512:
      BackwardRowsAvx512(x, weight, grad_y, grad_x, grad_w_acc, dim, eps_f,
                         row_begin, row_end);
      break;
    case SimdLevel::kAvx2:
      BackwardRowsAvx2(x, weight, grad_y, grad_x, grad_w_acc, dim, eps_f,
                       row_begin, row_end);
      break;
    default:
      BackwardRowsPortable(x, weight, grad_y, grad_x, grad_w_acc, dim, eps_f,
                           row_begin, row_end);
      break;
  }
}

}  // namespace lockstep::kernels
