// Batch-invariant causal attention on the GPU (fp32) for training, paged prefill and paged
// decode: one routine per (query, head) item, one block each, one fixed key order, no split-KV.
//
// For query i of sequence s (position p = first_positions[s] + i), head h, kv head
// g = h / (num_heads / num_kv_heads), keys in tiles of 256 positions [256c, 256c + 256):
//   s_j = (q · k_j) * scale                      (one fmaf chain over d = 0 .. head_dim-1)
//   per tile c, in order:  m_c = max(m_{c-1}, max_j s_j)
//     l_c   = l_{c-1} * exp(m_{c-1} - m_c) + sum_j exp(s_j - m_c)     (fixed 256-thread tree)
//     acc_c = acc_{c-1} * exp(m_{c-1} - m_c) + sum_j exp(s_j - m_c) v_j   (fmaf in key order)
//   out = acc_last / l_last
// The tiles start at absolute position 0, so the arithmetic depends only on the keys 0 .. p: a
// query computed alone in a decode step gives the same bits as inside a prefill or a training
// forward, whatever the other sequences and queries of the launch. (Not the bits of
// attention_cpu.h: GPU runs agree with GPU runs.)
//
// Keys and values are rows of a flat cache: row r starts at keys + r * kv_row_stride and holds
// [num_kv_heads, head_dim]; key_rows (sequence s's part starts at key_row_offsets[s]) names the
// row of each position 0 .. p. Training: one sequence, key_rows = 0, 1, 2, ...
// Raw device pointers (every array below lives on the device), asynchronous on `stream`.
#ifndef LOCKSTEP_MODEL_KERNELS_ATTENTION_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_ATTENTION_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels::cuda {

inline constexpr int64_t kAttentionMaxHeadDim = 256;

struct AttentionCudaProblem {
  const float* q = nullptr;  // [num_tokens, num_heads, head_dim]
  int64_t num_tokens = 0;
  int64_t num_sequences = 0;
  const int64_t* cu_seqlens = nullptr;       // [num_sequences + 1]: s's queries are rows
                                             // cu_seqlens[s] .. cu_seqlens[s + 1] - 1 (may be
                                             // none: an empty sequence is allowed)
  const int64_t* first_positions = nullptr;  // [num_sequences]: position of s's first query
  const int64_t* key_rows = nullptr;         // flat; s's positions start at key_row_offsets[s]
  const int64_t* key_row_offsets = nullptr;  // [num_sequences]
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t kv_row_stride = 0;  // floats between cache rows (>= num_kv_heads * head_dim)
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // divides num_heads
  int64_t head_dim = 0;      // 1 .. kAttentionMaxHeadDim
  float scale = 0;           // usually head_dim^-0.5
  float* out = nullptr;      // [num_tokens, num_heads, head_dim]
};

// kInvalidArgument for bad scalars or null pointers (the device arrays are not read on the host:
// they must be consistent, cu_seqlens ascending from 0 to num_tokens).
KernelStatus CausalAttentionCuda(const AttentionCudaProblem& problem, cudaStream_t stream);

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_ATTENTION_CUDA_H_
