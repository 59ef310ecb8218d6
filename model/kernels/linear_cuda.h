// Batch-invariant linear on the GPU: y = x W^T (+ b), fp32 or bf16 inputs, fp32 accumulate and
// fp32 output.
//
// Contract: every output y[m, n] is computed by one thread as one FMA chain in k order,
//   acc = 0;  for k = 0 .. K-1: acc = fmaf(x[m, k], W[n, k], acc);  y[m, n] = acc (+ b[n])
// (bf16 inputs are widened to fp32 exactly first; the bias add is one rounded fp32 add). Nothing
// else enters the sum: no split-K, no TF32, no tensor-core reduction, fixed tile sizes. The tile
// shape is picked from M (a small tile at decode sizes, a larger one above), but every tile runs
// the same per-output chain, so row m's bits never depend on M, the tile, the position of the row
// in the batch or the other rows. (A different order from linear_cpu.h's 16 chains: GPU and CPU
// bits are not meant to agree, GPU runs with themselves.)
//
// Raw device pointers, no LibTorch include. Asynchronous on `stream`.
#ifndef LOCKSTEP_MODEL_KERNELS_LINEAR_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_LINEAR_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

struct LinearCudaProblem {
  const void* x = nullptr;        // [M, K] row-major (fp32 or bf16), row stride x_stride (>= K)
  int64_t x_stride = 0;
  int64_t rows = 0;               // M (0: nothing to do)
  const void* weight = nullptr;   // [N, K] row-major, contiguous, same type as x
  int64_t out_features = 0;       // N
  int64_t in_features = 0;        // K
  const float* bias = nullptr;    // [N] fp32 or nullptr
  float* y = nullptr;             // [M, N] fp32, row stride y_stride (>= N)
  int64_t y_stride = 0;
};

// The tile family; kAuto picks from M (kSmall up to kSmallTileMaxRows rows). Tests and
// benchmarks force one to show that the bits do not depend on it.
enum class LinearTile { kAuto, kSmall, kLarge };
inline constexpr int64_t kSmallTileMaxRows = 32;

// kInvalidArgument for a bad shape, stride or null pointer; kCudaError for a failed launch.
KernelStatus LinearCuda(const LinearCudaProblem& problem, InputType input_type,
                        cudaStream_t stream, LinearTile tile = LinearTile::kAuto);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_CUDA_H_
