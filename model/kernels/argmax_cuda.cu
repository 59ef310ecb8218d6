#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "model/kernels/argmax_cuda.h"

namespace lockstep::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kNone = INT64_MAX;  // no value above -inf seen yet

// (value, index) a beats (value, index) b: larger value, or equal and earlier.
__device__ __forceinline__ bool Beats(float av, int64_t ai, float bv, int64_t bi) {
  return av > bv || (av == bv && ai < bi);
}

__global__ void __launch_bounds__(kThreads)
    ArgMaxKernel(const float* x, int64_t cols, int64_t* out) {
  __shared__ float best_value[kThreads];
  __shared__ int64_t best_index[kThreads];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float v = -INFINITY;
  int64_t index = kNone;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    if (row[j] > v) {  // NaN compares false; -inf never beats the initial -inf
      v = row[j];
      index = j;
    }
  }
  best_value[threadIdx.x] = v;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s && Beats(best_value[threadIdx.x + s], best_index[threadIdx.x + s],
                                 best_value[threadIdx.x], best_index[threadIdx.x])) {
      best_value[threadIdx.x] = best_value[threadIdx.x + s];
      best_index[threadIdx.x] = best_index[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_index[0] == kNone ? 0 : best_index[0];
}

}  // namespace

KernelStatus ArgMaxCuda(const float* x, int64_t rows, int64_t cols, int64_t* out,
                        cudaStream_t stream) {
  const char* kName = "ArgMaxCuda";
  if (rows < 0 || cols <= 0) {
    return InvalidArgument(kName, "rows " + std::to_string(rows) + ", cols " +
                                      std::to_string(cols) + " (need rows >= 0, cols > 0)");
  }
  if (rows == 0) return {};
  if (rows > 0x7fffffff) return InvalidArgument(kName, "too many rows for one launch");
  if (x == nullptr || out == nullptr) return InvalidArgument(kName, "x and out must be set");
  ArgMaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, out);
  return AfterLaunch(kName);
}

}  // namespace lockstep::kernels::cuda
