// Kernel section: one templated tile kernel (BM x BN outputs per block, TM x TN per thread, K
// staged through shared memory BK at a time). Launcher section: shape checks, tile choice.
#include "model/kernels/linear_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

namespace lockstep::kernels::cuda {
namespace {

constexpr int kBlockK = 16;

__device__ __forceinline__ float Widen(float v) { return v; }
__device__ __forceinline__ float Widen(__nv_bfloat16 v) { return __bfloat162float(v); }

// Thread (tr, tc) owns rows tr + i * (BM / TM) and columns tc + j * (BN / TN) of the block's
// tile. Each output's accumulator sees k = 0, 1, ..., K-1 in order, one fmaf each.
template <typename T, int BM, int BN, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    LinearTileKernel(LinearCudaProblem p) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kRowStep = BM / TM;
  constexpr int kColStep = BN / TN;
  __shared__ float x_tile[kBlockK][BM + 1];
  __shared__ float w_tile[kBlockK][BN + 1];
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int64_t K = p.in_features;
  const int tid = threadIdx.x;
  const int tr = tid / kColStep;
  const int tc = tid % kColStep;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    for (int e = tid; e < BM * kBlockK; e += kThreads) {
      const int m = e / kBlockK, kk = e % kBlockK;
      const int64_t r = row0 + m, k = k0 + kk;
      x_tile[kk][m] = (r < p.rows && k < K) ? Widen(x[r * p.x_stride + k]) : 0.0f;
    }
    for (int e = tid; e < BN * kBlockK; e += kThreads) {
      const int n = e / kBlockK, kk = e % kBlockK;
      const int64_t c = col0 + n, k = k0 + kk;
      w_tile[kk][n] = (c < p.out_features && k < K) ? Widen(w[c * K + k]) : 0.0f;
    }
    __syncthreads();
    const int k_count = K - k0 < kBlockK ? static_cast<int>(K - k0) : kBlockK;
    for (int kk = 0; kk < k_count; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = x_tile[kk][tr + i * kRowStep];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = w_tile[kk][tc + j * kColStep];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t r = row0 + tr + i * kRowStep;
    if (r >= p.rows) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t c = col0 + tc + j * kColStep;
      if (c >= p.out_features) continue;
      float v = acc[i][j];
      if (p.bias != nullptr) v = __fadd_rn(v, p.bias[c]);
      p.y[r * p.y_stride + c] = v;
    }
  }
}

template <typename T, int BM, int BN, int TM, int TN>
KernelStatus Launch(const LinearCudaProblem& p, cudaStream_t stream) {
  const int64_t row_blocks = (p.rows + BM - 1) / BM;
  const int64_t col_blocks = (p.out_features + BN - 1) / BN;
  if (row_blocks > 0x7fffffff || col_blocks > 65535) {
    return InvalidArgument("LinearCuda", "problem too large for one launch (rows " +
                                             std::to_string(p.rows) + ", out_features " +
                                             std::to_string(p.out_features) + ")");
  }
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(col_blocks));
  LinearTileKernel<T, BM, BN, TM, TN><<<grid, (BM / TM) * (BN / TN), 0, stream>>>(p);
  return AfterLaunch("LinearCuda");
}

// Small: 8 x 64 outputs, 1 x 2 per thread (decode: many blocks over N, no wasted rows beyond 8).
// Large: 64 x 64 outputs, 4 x 4 per thread. Both 256 threads.
template <typename T>
KernelStatus LaunchTile(const LinearCudaProblem& p, LinearTile tile, cudaStream_t stream) {
  if (tile == LinearTile::kAuto) {
    tile = p.rows <= kSmallTileMaxRows ? LinearTile::kSmall : LinearTile::kLarge;
  }
  if (tile == LinearTile::kSmall) return Launch<T, 8, 64, 1, 2>(p, stream);
  return Launch<T, 64, 64, 4, 4>(p, stream);
}

}  // namespace

KernelStatus LinearCuda(const LinearCudaProblem& p, InputType input_type, cudaStream_t stream,
                        LinearTile tile) {
  const char* kName = "LinearCuda";
  if (p.rows < 0) return InvalidArgument(kName, "rows " + std::to_string(p.rows) + " < 0");
  if (p.in_features <= 0 || p.out_features <= 0) {
    return InvalidArgument(kName, "in_features " + std::to_string(p.in_features) +
                                      " and out_features " + std::to_string(p.out_features) +
                                      " must be positive");
  }
  if (p.x_stride < p.in_features || p.y_stride < p.out_features) {
    return InvalidArgument(kName, "x_stride " + std::to_string(p.x_stride) + " < in_features " +
                                      std::to_string(p.in_features) + " or y_stride " +
                                      std::to_string(p.y_stride) + " < out_features " +
                                      std::to_string(p.out_features));
  }
  if (p.rows == 0) return {};
  if (p.x == nullptr || p.weight == nullptr || p.y == nullptr) {
    return InvalidArgument(kName, "x, weight and y must be set");
  }
  if (input_type == InputType::kBFloat16) return LaunchTile<__nv_bfloat16>(p, tile, stream);
  return LaunchTile<float>(p, tile, stream);
}

}  // namespace lockstep::kernels::cuda
