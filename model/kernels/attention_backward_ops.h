// The backward of the fixed-order causal attention (attention_ops.h), written out by hand.
//
// Gradients need not be batch-invariant (DESIGN.md), only correct: this is the textbook
// softmax-attention backward, the same math as differentiating the fast-mode formula
// (ops::CausalAttention) with autograd, without the parts autograd cannot skip there: the
// formula's forward output (probs x values), its broadcast copies of the keys and values per
// query head, the masked keys of each block of queries, and the masked-fill and softmax backward
// nodes. The products are LibTorch batched matmuls; on the CPU the row passes between them (P
// from the scores, dS from dP) are one fused kernel pass each (attention_backward_cpu.h), on
// CUDA LibTorch ops. Per kv head g and the queries of its group of heads stacked as rows
// (Q_g: [Lq * group, d]):
//   P    = softmax(mask(Q_g K_g^T * scale))       the forward's probabilities, recomputed
//   dV_g = P^T dO_g
//   dP   = dO_g V_g^T
//   dS   = P * (dP - rowsum(P * dP))               (rowsum(P * dP) = dO . out, per query row)
//   dQ_g = dS K_g * scale,  dK_g = dS^T Q_g * scale
#ifndef LOCKSTEP_MODEL_KERNELS_ATTENTION_BACKWARD_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_ATTENTION_BACKWARD_OPS_H_

#include <torch/torch.h>

namespace lockstep::kernels {

struct AttentionGrads {
  torch::Tensor q;       // [num_queries, num_heads, head_dim]
  torch::Tensor keys;    // the shape of keys (zero in rows key_rows does not name)
  torch::Tensor values;  // the shape of values
};

// q, keys, values, key_rows and first_position as FixedOrderAttention took them (float32 CPU or
// CUDA tensors); grad_out: [num_queries, num_heads, head_dim].
AttentionGrads CausalAttentionBackward(const torch::Tensor& q, const torch::Tensor& keys,
                                       const torch::Tensor& values, const torch::Tensor& key_rows,
                                       int64_t first_position, const torch::Tensor& grad_out);

// The same, adding the keys' and values' gradients into grad_keys and grad_values (the shapes
// of keys and values) and returning q's: the sequences of a packed batch share one pair.
torch::Tensor CausalAttentionBackwardAdd(const torch::Tensor& q, const torch::Tensor& keys,
                                         const torch::Tensor& values, const torch::Tensor& key_rows,
                                         int64_t first_position, const torch::Tensor& grad_out,
                                         torch::Tensor& grad_keys, torch::Tensor& grad_values);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ATTENTION_BACKWARD_OPS_H_
