// Batch-invariant RMSNorm (fp32), Hugging Face semantics:
//   y[r, :] = weight * (x[r, :] * 1/sqrt(mean(x[r, :]^2) + eps))
// Each row is reduced by one thread in one fixed order that depends only on `dim`.
// Raw pointers, no LibTorch include; rows [row_begin, row_end) so the caller can thread it.
#ifndef LOCKSTEP_MODEL_KERNELS_RMS_NORM_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_RMS_NORM_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

void RmsNormRows(const float* x, const float* weight, float* y, int64_t dim, double eps,
                 int64_t row_begin, int64_t row_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_RMS_NORM_CPU_H_
