// Batch-invariant RMSNorm on the GPU (fp32), Hugging Face semantics:
//   y[r, :] = weight * (x[r, :] * (1 / sqrt(mean(x[r, :]^2) + eps)))
// One block of 256 threads per row; the sum of squares in block_reduce_cuda.cuh's fixed order
// (depends on `dim` only), IEEE division and square root. Row r's bits never depend on the number
// of rows or the other rows. Raw device pointers, asynchronous on `stream`.
#ifndef LOCKSTEP_MODEL_KERNELS_RMS_NORM_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_RMS_NORM_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

// x, y: [rows, dim] contiguous (y may alias x); weight: [dim].
KernelStatus RmsNormCuda(const float* x, const float* weight, float* y, int64_t rows, int64_t dim,
                         float eps, cudaStream_t stream);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_RMS_NORM_CUDA_H_
