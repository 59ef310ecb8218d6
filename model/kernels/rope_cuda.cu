#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "model/kernels/rope_cuda.h"

namespace lockstep::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) RopeKernel(RopeCudaProblem p) {
  const int64_t per_token = p.num_heads * p.head_dim;
  const int64_t count = p.num_tokens * per_token;
  const int64_t half = p.head_dim / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < count;
       e += stride) {
    const int64_t t = e / per_token;
    const int64_t i = e % p.head_dim;
    const int64_t pos = p.positions[t];
    if (pos < 0 || pos >= p.max_positions) {
      p.out[e] = NAN;
      continue;
    }
    const float c = p.cos[pos * p.head_dim + i];
    const float s = p.sin[pos * p.head_dim + i];
    const float v = p.x[e];
    p.out[e] = i < half ? __fsub_rn(__fmul_rn(v, c), __fmul_rn(p.x[e + half], s))
                        : __fadd_rn(__fmul_rn(v, c), __fmul_rn(p.x[e - half], s));
  }
}

}  // namespace

KernelStatus RopeCuda(const RopeCudaProblem& p, cudaStream_t stream) {
  const char* kName = "RopeCuda";
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.head_dim <= 0 || p.head_dim % 2 != 0 ||
      p.max_positions <= 0) {
    return InvalidArgument(kName, "num_tokens " + std::to_string(p.num_tokens) + ", num_heads " +
                                      std::to_string(p.num_heads) + ", head_dim " +
                                      std::to_string(p.head_dim) + ", max_positions " +
                                      std::to_string(p.max_positions) +
                                      " (head_dim must be even and positive)");
  }
  if (p.num_tokens == 0) return {};
  if (p.x == nullptr || p.cos == nullptr || p.sin == nullptr || p.positions == nullptr ||
      p.out == nullptr) {
    return InvalidArgument(kName, "x, cos, sin, positions and out must be set");
  }
  if (p.out == p.x) return InvalidArgument(kName, "out may not alias x");
  const int64_t blocks = (p.num_tokens * p.num_heads * p.head_dim + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  RopeKernel<<<grid, kThreads, 0, stream>>>(p);
  return AfterLaunch(kName);
}

}  // namespace lockstep::kernels::cuda
