#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "model/kernels/block_reduce_cuda.cuh"
#include "model/kernels/log_softmax_cuda.h"

namespace lockstep::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// The row's max m and log(sum exp(z - m)), identical in both kernels.
__device__ void RowStatistics(const float* row, int64_t vocab, float temperature, float* scratch,
                              float* max_out, float* log_sum_out) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads)
    m = fmaxf(m, __fdiv_rn(row[j], temperature));
  m = BlockMax<kThreads>(m, scratch);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    s = __fadd_rn(s, expf(__fsub_rn(__fdiv_rn(row[j], temperature), m)));
  }
  s = BlockSum<kThreads>(s, scratch);
  *max_out = m;
  *log_sum_out = logf(s);
}

__global__ void __launch_bounds__(kThreads)
    LogSoftmaxKernel(const float* logits, float* out, int64_t vocab, float temperature) {
  __shared__ float scratch[kThreads];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * vocab;
  float m, log_sum;
  RowStatistics(row, vocab, temperature, scratch, &m, &log_sum);
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    dst[j] = __fsub_rn(__fsub_rn(__fdiv_rn(row[j], temperature), m), log_sum);
  }
}

__global__ void __launch_bounds__(kThreads)
    TargetLogProbsKernel(const float* logits, const int64_t* targets, float* out, int64_t vocab,
                         float temperature) {
  __shared__ float scratch[kThreads];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float m, log_sum;
  RowStatistics(row, vocab, temperature, scratch, &m, &log_sum);
  if (threadIdx.x == 0) {
    const int64_t t = targets[blockIdx.x];
    out[blockIdx.x] = (t < 0 || t >= vocab)
                          ? NAN
                          : __fsub_rn(__fsub_rn(__fdiv_rn(row[t], temperature), m), log_sum);
  }
}

KernelStatus Check(const char* name, const float* logits, const void* out, int64_t rows,
                   int64_t vocab, float temperature) {
  if (rows < 0 || vocab <= 0) {
    return InvalidArgument(name, "rows " + std::to_string(rows) + ", vocab " +
                                     std::to_string(vocab) + " (need rows >= 0, vocab > 0)");
  }
  if (!(temperature > 0.0f)) return InvalidArgument(name, "temperature must be > 0");
  if (rows > 0x7fffffff) return InvalidArgument(name, "too many rows for one launch");
  if (rows > 0 && (logits == nullptr || out == nullptr)) {
    return InvalidArgument(name, "logits and out must be set");
  }
  return {};
}

}  // namespace

KernelStatus LogSoftmaxCuda(const float* logits, float* out, int64_t rows, int64_t vocab,
                            float temperature, cudaStream_t stream) {
  KernelStatus status = Check("LogSoftmaxCuda", logits, out, rows, vocab, temperature);
  if (!status.ok() || rows == 0) return status;
  LogSoftmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, out, vocab,
                                                                         temperature);
  return AfterLaunch("LogSoftmaxCuda");
}

KernelStatus TargetLogProbsCuda(const float* logits, const int64_t* targets, float* out,
                                int64_t rows, int64_t vocab, float temperature,
                                cudaStream_t stream) {
  KernelStatus status = Check("TargetLogProbsCuda", logits, out, rows, vocab, temperature);
  if (!status.ok() || rows == 0) return status;
  if (targets == nullptr) return InvalidArgument("TargetLogProbsCuda", "targets must be set");
  TargetLogProbsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, targets, out,
                                                                             vocab, temperature);
  return AfterLaunch("TargetLogProbsCuda");
}

}  // namespace lockstep::kernels::cuda
