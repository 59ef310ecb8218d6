// Fixed-order reductions across one thread block, for the row kernels (*_cuda.cu). The order is
// a function of the block size only (a compile-time constant in every kernel here), never of the
// grid or of the number of rows: in each caller, thread t first folds elements t, t + kThreads,
// ... in order; here the kThreads partials are combined pairwise (t + s into t, for
// s = kThreads/2, ..., 1). Device code only; included by .cu files.
#ifndef LOCKSTEP_MODEL_KERNELS_BLOCK_REDUCE_CUDA_CUH_
#define LOCKSTEP_MODEL_KERNELS_BLOCK_REDUCE_CUDA_CUH_

#include <cuda_runtime.h>

namespace lockstep::kernels::cuda {

// Sum of every thread's `value`, returned to every thread. kThreads must be blockDim.x (every
// kernel here launches exactly its compile-time block size) and every thread must call it.
// `scratch`: kThreads floats of shared memory, free on entry and on return.
template <int kThreads>
__device__ __forceinline__ float BlockSum(float value, float* scratch) {
  static_assert((kThreads & (kThreads - 1)) == 0, "power of two");
  scratch[threadIdx.x] = value;
  __syncthreads();
#pragma unroll
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      scratch[threadIdx.x] = __fadd_rn(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const float total = scratch[0];
  __syncthreads();
  return total;
}

// Maximum over the block, with BlockSum's calling rules and tree (fmaxf: a NaN loses to a number).
template <int kThreads>
__device__ __forceinline__ float BlockMax(float value, float* scratch) {
  static_assert((kThreads & (kThreads - 1)) == 0, "power of two");
  scratch[threadIdx.x] = value;
  __syncthreads();
#pragma unroll
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const float total = scratch[0];
  __syncthreads();
  return total;
}

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_BLOCK_REDUCE_CUDA_CUH_
