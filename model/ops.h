// The numeric operations of the forward pass, as free functions over tensors. The layers call
// only these; each dispatches on the model's NumericMode to stock LibTorch ops (kFast) or to the
// batch-invariant kernels in model/kernels/ (kBatchInvariant, float32 only).
#ifndef LOCKSTEP_MODEL_OPS_H_
#define LOCKSTEP_MODEL_OPS_H_

#include <torch/torch.h>

#include "model/kernels/linear_ops.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::ops {

// y = x W^T (+ b). x: [..., in], weight: [out, in], bias: [out] or undefined. Batch-invariant
// mode always runs our kernel (model/kernels/linear_cpu.h); fast mode runs it for small float32
// CPU inputs (decode steps), where stock sgemm's per-call packing of the whole weight dominates,
// and stock LibTorch otherwise.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     NumericMode mode);

// Hugging Face RMSNorm: in float32, x * rsqrt(mean(x^2) + eps), cast back, times weight.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                      NumericMode mode);

// SwiGLU gate: silu(gate) * up.
torch::Tensor SiluMul(const torch::Tensor& gate, const torch::Tensor& up, NumericMode mode);

// Causal attention of one sequence's queries against its keys (fast-mode formula).
//   q: [num_queries, num_heads, head_dim]; k, v: [num_keys, num_kv_heads, head_dim];
//   query i sits at position num_keys - num_queries + i and sees keys 0 .. that position.
// num_heads must be a multiple of num_kv_heads (GQA). Softmax runs in float32 with scale
// head_dim^-0.5. Returns [num_queries, num_heads, head_dim] in q's dtype.
torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v);

// The same attention with keys and values addressed by row: position j of the sequence is row
// key_rows[j] of `keys`/`values` ([rows, num_kv_heads, head_dim]); query i is at position
// first_position + i. Serves training (a sequence's own rows) and paged mode (cache slots).
// An undefined key_rows means rows 0, 1, ... in order (training), which fast mode then reads in
// place instead of gathering a copy. Fast mode runs decode-sized paged calls (few queries) in
// batch-invariant mode's kernel, which reads the rows in place.
torch::Tensor AttentionOverRows(const torch::Tensor& q, const torch::Tensor& keys,
                                const torch::Tensor& values, const torch::Tensor& key_rows,
                                int64_t first_position, NumericMode mode);

// log_softmax(logits / temperature)[i, targets[i]] in float32. logits: [n, vocab] (any float
// dtype), targets: [n] int64. Returns [n] float32.
torch::Tensor TargetLogProbs(const torch::Tensor& logits, const torch::Tensor& targets,
                             double temperature, NumericMode mode);

// log_softmax(logits / temperature) over the last dimension in float32; in batch-invariant mode
// its entries equal TargetLogProbs's bit for bit (sampler and trainer agree).
torch::Tensor LogSoftmax(const torch::Tensor& logits, double temperature, NumericMode mode);

}  // namespace lockstep::ops

#endif  // LOCKSTEP_MODEL_OPS_H_
