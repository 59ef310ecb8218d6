#include <cuda_runtime.h>

#include <string>

#include "model/kernels/block_reduce_cuda.cuh"
#include "model/kernels/rms_norm_cuda.h"

namespace lockstep::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  __shared__ float scratch[kThreads];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* out = y + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    sum = __fadd_rn(sum, __fmul_rn(row[i], row[i]));
  }
  sum = BlockSum<kThreads>(sum, scratch);
  const float mean = __fdiv_rn(sum, static_cast<float>(dim));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    out[i] = __fmul_rn(weight[i], __fmul_rn(row[i], inv));
  }
}

}  // namespace

KernelStatus RmsNormCuda(const float* x, const float* weight, float* y, int64_t rows, int64_t dim,
                         float eps, cudaStream_t stream) {
  const char* kName = "RmsNormCuda";
  if (rows < 0 || dim <= 0) {
    return InvalidArgument(kName, "rows " + std::to_string(rows) + ", dim " + std::to_string(dim) +
                                      " (need rows >= 0, dim > 0)");
  }
  if (!(eps >= 0.0f)) return InvalidArgument(kName, "eps must be >= 0");
  if (rows == 0) return {};
  if (rows > 0x7fffffff) return InvalidArgument(kName, "too many rows for one launch");
  if (x == nullptr || weight == nullptr || y == nullptr) {
    return InvalidArgument(kName, "x, weight and y must be set");
  }
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, y, dim, eps);
  return AfterLaunch(kName);
}

}  // namespace lockstep::kernels::cuda
