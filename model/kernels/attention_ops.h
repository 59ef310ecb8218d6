// LibTorch glue for the fixed-order causal attention (kernel: attention_cpu.h); FixedOrder* as in
// linear_ops.h. CUDA tensors run the CUDA kernel (ops_cuda.h; key_rows may stay on the host).
#ifndef LOCKSTEP_MODEL_KERNELS_ATTENTION_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_ATTENTION_OPS_H_

#include <torch/torch.h>

#include <vector>

namespace lockstep::kernels {

// Causal attention of one sequence's queries over key/value rows.
//   q: [num_queries, num_heads, head_dim] float32; query i is at position first_position + i.
//   keys, values: [num_rows, num_kv_heads, head_dim] float32 (a sequence's own keys in training,
//     the flat block cache in paged mode); key_rows: [first_position + num_queries] int64, the
//     row holding each position.
// Returns [num_queries, num_heads, head_dim]. Differentiable in q, keys and values (backward:
// attention_backward_ops.h, the gradients of the fast-mode formula).
torch::Tensor FixedOrderAttention(const torch::Tensor& q, const torch::Tensor& keys,
                                  const torch::Tensor& values, const torch::Tensor& key_rows,
                                  int64_t first_position);

// The same attention for every sequence of a packed batch in one parallel region (decode steps
// and training: one call per layer instead of one per sequence). q: [num_tokens, num_heads, head_dim], with
// sequence s's queries at rows cu_seqlens[s] .. cu_seqlens[s + 1]; key_rows[s] and
// first_positions[s] as for FixedOrderAttention. Each (query, head) item gives the bits it
// gives there. Differentiable in q, keys and values as FixedOrderAttention, one graph node for
// the batch (training: a packed micro-batch's sequences, each keys rows of its own).
torch::Tensor FixedOrderAttentionPacked(const torch::Tensor& q, const torch::Tensor& keys,
                                        const torch::Tensor& values,
                                        const std::vector<torch::Tensor>& key_rows,
                                        const std::vector<int64_t>& first_positions,
                                        const std::vector<int64_t>& cu_seqlens);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ATTENTION_OPS_H_
