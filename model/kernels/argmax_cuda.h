// First index of the largest value of each row on the GPU (fp32), for greedy sampling; the
// semantics of argmax_cpu.h: exact, so the same for any batch or launch; NaN never wins; a row
// with no value above -inf gives 0. One block of 256 threads per row. Raw device pointers.
#ifndef LOCKSTEP_MODEL_KERNELS_ARGMAX_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_ARGMAX_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

// x: [rows, cols] contiguous; out: [rows] device int64.
KernelStatus ArgMaxCuda(const float* x, int64_t rows, int64_t cols, int64_t* out,
                        cudaStream_t stream);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_ARGMAX_CUDA_H_
