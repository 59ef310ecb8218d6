#include <cuda_runtime.h>

#include <string>

#include "model/kernels/silu_mul_cuda.h"

namespace lockstep::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    SiluMulKernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += stride) {
    const float g = gate[i];
    const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
    out[i] = __fmul_rn(silu, up[i]);
  }
}

}  // namespace

KernelStatus SiluMulCuda(const float* gate, const float* up, float* out, int64_t count,
                         cudaStream_t stream) {
  const char* kName = "SiluMulCuda";
  if (count < 0) return InvalidArgument(kName, "count " + std::to_string(count) + " < 0");
  if (count == 0) return {};
  if (gate == nullptr || up == nullptr || out == nullptr) {
    return InvalidArgument(kName, "gate, up and out must be set");
  }
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  SiluMulKernel<<<grid, kThreads, 0, stream>>>(gate, up, out, count);
  return AfterLaunch(kName);
}

}  // namespace lockstep::kernels::cuda
