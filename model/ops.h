// The numeric operations of the forward pass, as free functions over tensors. The layers call
// only these, so that a second numeric mode (batch-invariant kernels, model/kernels/) can slot in
// behind the same signatures. This file is the `fast` mode: stock LibTorch ops.
#ifndef LOCKSTEP_MODEL_OPS_H_
#define LOCKSTEP_MODEL_OPS_H_

#include <torch/torch.h>

namespace lockstep::ops {

// y = x W^T (+ b). x: [..., in], weight: [out, in], bias: [out] or undefined.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias = {});

// Hugging Face RMSNorm: in float32, x * rsqrt(mean(x^2) + eps), cast back, times weight.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// SwiGLU gate: silu(gate) * up.
torch::Tensor SiluMul(const torch::Tensor& gate, const torch::Tensor& up);

// Causal attention of one sequence's queries against its keys.
//   q: [num_queries, num_heads, head_dim]; k, v: [num_keys, num_kv_heads, head_dim];
//   query i sits at position num_keys - num_queries + i and sees keys 0 .. that position.
// num_heads must be a multiple of num_kv_heads (GQA). Softmax runs in float32 with scale
// head_dim^-0.5. Returns [num_queries, num_heads, head_dim] in q's dtype.
torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v);

// log_softmax(logits / temperature)[i, targets[i]] in float32. logits: [n, vocab] (any float
// dtype), targets: [n] int64. Returns [n] float32.
torch::Tensor TargetLogProbs(const torch::Tensor& logits, const torch::Tensor& targets,
                             double temperature = 1.0);

}  // namespace lockstep::ops

#endif  // LOCKSTEP_MODEL_OPS_H_
