// Batch-invariant log-softmax over the vocabulary on the GPU, fp32 throughout:
//   z_j = logits[r, j] / T,  m = max_j z_j,  s = sum_j exp(z_j - m)   (fixed block order)
//   out[r, j] = (z_j - m) - log(s)
// One block of 512 threads per row; the order of the sum depends on `vocab` only, so a row's bits
// never depend on the number of rows. TargetLogProbsCuda gives out[r, targets[r]] of the same
// arithmetic (bit for bit the value LogSoftmaxCuda writes there). Raw device pointers,
// asynchronous on `stream`.
#ifndef LOCKSTEP_MODEL_KERNELS_LOG_SOFTMAX_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_LOG_SOFTMAX_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

// logits, out: [rows, vocab] contiguous.
KernelStatus LogSoftmaxCuda(const float* logits, float* out, int64_t rows, int64_t vocab,
                            float temperature, cudaStream_t stream);

// targets: [rows] device int64, each in [0, vocab) (a target outside gives NaN); out: [rows].
KernelStatus TargetLogProbsCuda(const float* logits, const int64_t* targets, float* out,
                                int64_t rows, int64_t vocab, float temperature,
                                cudaStream_t stream);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_LOG_SOFTMAX_CUDA_H_
