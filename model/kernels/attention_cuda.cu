// Kernel section: one block of 256 threads per (query, head) item; thread t scores key 256c + t of
// tile c, then threads d < head_dim own output dimension d. Launcher section: checks.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "model/kernels/attention_cuda.h"
#include "model/kernels/block_reduce_cuda.cuh"

namespace lockstep::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // also the key tile

__global__ void __launch_bounds__(kThreads) CausalAttentionKernel(AttentionCudaProblem p) {
  __shared__ float q_shared[kAttentionMaxHeadDim];
  __shared__ float weights[kThreads];
  __shared__ float scratch[kThreads];
  const int64_t item = blockIdx.x;
  const int64_t token = item / p.num_heads;
  const int64_t head = item % p.num_heads;
  const int64_t kv_head = head / (p.num_heads / p.num_kv_heads);
  const int64_t dim = p.head_dim;
  const int tid = threadIdx.x;

  // The sequence holding this token: the last s with cu_seqlens[s] <= token (an empty sequence,
  // cu_seqlens[s] == cu_seqlens[s + 1], is passed over: the next one has the same start).
  int64_t lo = 0, hi = p.num_sequences - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (p.cu_seqlens[mid] <= token)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t position = p.first_positions[lo] + (token - p.cu_seqlens[lo]);
  const int64_t* rows = p.key_rows + p.key_row_offsets[lo];
  const int64_t head_offset = kv_head * dim;

  if (tid < dim) q_shared[tid] = p.q[item * dim + tid];
  __syncthreads();

  float running_max = -INFINITY;
  float running_sum = 0.0f;
  float acc = 0.0f;  // output dimension tid (when tid < dim)
  for (int64_t tile = 0; tile <= position; tile += kThreads) {
    const int64_t j = tile + tid;
    float score = -INFINITY;
    if (j <= position) {
      const float* k = p.keys + rows[j] * p.kv_row_stride + head_offset;
      float dot = 0.0f;
      for (int64_t d = 0; d < dim; ++d) dot = fmaf(q_shared[d], k[d], dot);
      score = __fmul_rn(dot, p.scale);
    }
    const float tile_max = BlockMax<kThreads>(score, scratch);
    const float new_max = fmaxf(running_max, tile_max);
    const float rescale = expf(__fsub_rn(running_max, new_max));  // 0 on the first tile
    const float w = j <= position ? expf(__fsub_rn(score, new_max)) : 0.0f;
    weights[tid] = w;  // read below after BlockSum's barriers
    const float tile_sum = BlockSum<kThreads>(w, scratch);
    running_sum = __fadd_rn(__fmul_rn(running_sum, rescale), tile_sum);
    if (tid < dim) {
      const int64_t count = position + 1 - tile < kThreads ? position + 1 - tile : kThreads;
      float tile_acc = __fmul_rn(acc, rescale);
      for (int64_t jj = 0; jj < count; ++jj) {
        const float* v = p.values + rows[tile + jj] * p.kv_row_stride + head_offset;
        tile_acc = fmaf(weights[jj], v[tid], tile_acc);
      }
      acc = tile_acc;
    }
    running_max = new_max;
    __syncthreads();  // weights[] is rewritten by the next tile
  }
  if (tid < dim) p.out[item * dim + tid] = __fdiv_rn(acc, running_sum);
}

}  // namespace

KernelStatus CausalAttentionCuda(const AttentionCudaProblem& p, cudaStream_t stream) {
  const char* kName = "CausalAttentionCuda";
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 ||
      p.num_heads % p.num_kv_heads != 0 || p.head_dim <= 0 || p.head_dim > kAttentionMaxHeadDim) {
    return InvalidArgument(kName, "num_tokens " + std::to_string(p.num_tokens) + ", num_heads " +
                                      std::to_string(p.num_heads) + ", num_kv_heads " +
                                      std::to_string(p.num_kv_heads) + ", head_dim " +
                                      std::to_string(p.head_dim) +
                                      " (num_kv_heads must divide num_heads; head_dim <= " +
                                      std::to_string(kAttentionMaxHeadDim) + ")");
  }
  if (p.kv_row_stride < p.num_kv_heads * p.head_dim) {
    return InvalidArgument(
        kName, "kv_row_stride " + std::to_string(p.kv_row_stride) + " < num_kv_heads * head_dim");
  }
  if (p.num_tokens == 0) return {};
  if (p.num_sequences <= 0) {
    return InvalidArgument(kName, "num_sequences " + std::to_string(p.num_sequences) +
                                      " must be positive when num_tokens > 0");
  }
  if (p.q == nullptr || p.cu_seqlens == nullptr || p.first_positions == nullptr ||
      p.key_rows == nullptr || p.key_row_offsets == nullptr || p.keys == nullptr ||
      p.values == nullptr || p.out == nullptr) {
    return InvalidArgument(kName, "every array must be set");
  }
  const int64_t items = p.num_tokens * p.num_heads;
  if (items > 0x7fffffff) return InvalidArgument(kName, "too many (query, head) items");
  CausalAttentionKernel<<<static_cast<unsigned>(items), kThreads, 0, stream>>>(p);
  return AfterLaunch(kName);
}

}  // namespace lockstep::kernels::cuda
