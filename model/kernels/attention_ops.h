// LibTorch glue for the batch-invariant causal attention (kernel: attention_cpu.h).
#ifndef LOCKSTEP_MODEL_KERNELS_ATTENTION_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_ATTENTION_OPS_H_

#include <torch/torch.h>

namespace lockstep::kernels {

// Causal attention of one sequence's queries over key/value rows.
//   q: [num_queries, num_heads, head_dim] float32; query i is at position first_position + i.
//   keys, values: [num_rows, num_kv_heads, head_dim] float32 (a sequence's own keys in training,
//     the flat block cache in paged mode); key_rows: [first_position + num_queries] int64, the
//     row holding each position.
// Returns [num_queries, num_heads, head_dim]. Differentiable in q, keys and values (backward by
// the fast-mode formula).
torch::Tensor BatchInvariantAttention(const torch::Tensor& q, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& key_rows,
                                      int64_t first_position);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ATTENTION_OPS_H_
