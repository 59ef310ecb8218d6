// The gradients of RMSNorm (rms_norm_cpu.h) for fp32 rows, y = w * x * inv with
// inv = 1 / sqrt(mean(x^2) + eps):
//   grad_x = inv * (grad_y * w) - x * inv^3 * sum(grad_y * w * x) / dim
//   grad_w = sum over rows of grad_y * x * inv
// One pass over a row's x and grad_y (the row stays in L1) instead of the dozen
// tensor passes of differentiating the formula with autograd. Gradients need not
// be batch-invariant (DESIGN.md): the sums here run in 16 interleaved partial
// sums, vectorised by the compiler for the CPU's SIMD level.
// Raw pointers, no LibTorch include; rows [row_begin, row_end) so the caller can
// thread it.
#ifndef LOCKSTEP_MODEL_KERNELS_RMS_NORM_BACKWARD_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_RMS_NORM_BACKWARD_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

// Writes grad_x's rows [row_begin, row_end) and adds those rows' grad_w terms
// into grad_w_acc[dim] (one accumulator per caller thread; the caller sums them
// in a fixed order).
void RmsNormBackwardRows(const float* x, const float* weight, const float* grad_y,
                         float* grad_x, float* grad_w_acc, int64_t dim, double eps,
                         int64_t row_begin, int64_t row_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_RMS_NORM_BACKWARD_CPU_H_
