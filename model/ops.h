// The numeric operations of the forward pass, as free functions over tensors. The layers call
// only these; each dispatches on the model's NumericMode to stock LibTorch ops (kFast) or to the
// fixed-order kernels in model/kernels/ (kBatchInvariant, float32 only; CUDA tensors run their
// CUDA kernels, kernels/ops_cuda.h, compiled only so far). Fast mode also runs
// our kernels where stock LibTorch is slow on CPU (said per op); the choice depends on the
// forward's kind where an op says so (forward_kind.h), never on grad mode, so a trainer's no-grad
// and grad forwards agree bit for bit.
#ifndef LOCKSTEP_MODEL_OPS_H_
#define LOCKSTEP_MODEL_OPS_H_

#include <torch/torch.h>

#include <vector>

#include "model/forward_kind.h"
#include "model/kernels/linear_ops.h"
#include "model/kernels/moe_routing_ops.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::ops {

// y = x W^T (+ b). x: [..., in], weight: [out, in], bias: [out] or undefined. Batch-invariant
// mode always runs our kernel (model/kernels/linear_cpu.h); fast mode runs it for float32 CPU
// inputs of decode size, where stock sgemm's per-call packing of the whole weight dominates, and
// of any size in a paged forward (`kind` kPaged: the generator's, LM head included); stock
// LibTorch otherwise.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     NumericMode mode, ForwardKind kind);

// The same x through several linears (q, k and v; gate and up): output i is what
// Linear(x, weights[i], biases[i], mode, kind) gives, bit for bit. Where Linear runs our kernel
// for all of them, they are one kernel call (kernels::FixedOrderLinears). biases: one per weight,
// undefined for none.
std::vector<torch::Tensor> Linears(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                                   const std::vector<torch::Tensor>& biases, NumericMode mode,
                                   ForwardKind kind);

// Hugging Face RMSNorm: in float32, x * rsqrt(mean(x^2) + eps), cast back, times weight.
// Float32 CPU inputs run the fixed-order kernel in both modes, at every size (see ops.cc): at
// 2 threads stock LibTorch 1.13 takes 21 us on [8, 768] and 78 on [256, 768] where the kernel
// takes 4.3 and 30 (bench_kernels rms_norm_*); other inputs run RmsNormFormula.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                      NumericMode mode);

// The RMSNorm formula in stock LibTorch ops (differentiable): fast mode's fallback, the
// formula whose gradients the kernel's backward computes, and what it differentiates on CUDA.
torch::Tensor RmsNormFormula(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// SwiGLU gate: silu(gate) * up. Float32 CPU inputs run the fixed-order kernel in both
// modes (1.5-2x stock: bench_kernels silu_mul_*); others run SiluMulFormula.
torch::Tensor SiluMul(const torch::Tensor& gate, const torch::Tensor& up, NumericMode mode);

// silu(gate) * up in stock LibTorch ops (differentiable).
torch::Tensor SiluMulFormula(const torch::Tensor& gate, const torch::Tensor& up);

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
// An undefined key_rows means rows 0, 1, ... in order (training), read in place. Fast mode runs
// float32 CPU training calls and decode-sized paged calls (few queries) in batch-invariant
// mode's kernel (its forward and backward are the faster there), the rest in the formula.
torch::Tensor AttentionOverRows(const torch::Tensor& q, const torch::Tensor& keys,
                                const torch::Tensor& values, const torch::Tensor& key_rows,
                                int64_t first_position, NumericMode mode);

// AttentionOverRows for every sequence of a packed batch (paged mode): q: [num_tokens, num_heads,
// head_dim], sequence s's queries at rows cu_seqlens[s] .. cu_seqlens[s + 1], its key rows and
// first position key_rows[s], first_positions[s]. Float32 CPU tensors in both modes, and CUDA
// ones in batch-invariant mode, run one kernel call for them all, with or without a graph (the
// bits AttentionOverRows's kernel gives each sequence; one parallel region and one graph node
// instead of one per sequence); otherwise it calls AttentionOverRows per sequence. Returns
// [num_tokens, num_heads, head_dim].
torch::Tensor PackedAttentionOverRows(const torch::Tensor& q, const torch::Tensor& keys,
                                      const torch::Tensor& values,
                                      const std::vector<torch::Tensor>& key_rows,
                                      const std::vector<int64_t>& first_positions,
                                      const std::vector<int64_t>& cu_seqlens, NumericMode mode);

// Causal attention of every sequence of a packed training batch over its own keys: q, k, v
// [num_tokens, heads or kv heads, head_dim], sequence s in rows cu_seqlens[s] .. cu_seqlens[s + 1]
// from position 0. Each sequence gets AttentionOverRows's result for its rows (bit for bit in
// batch-invariant mode); where the kernel runs (PackedAttentionOverRows's rule) one call and one
// graph node cover the batch. Differentiable.
torch::Tensor TrainingAttention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const std::vector<int64_t>& cu_seqlens,
                                NumericMode mode);

// log_softmax(logits / temperature)[i, targets[i]] in float32. logits: [n, vocab] (any float
// dtype), targets: [n] int64. Returns [n] float32.
torch::Tensor TargetLogProbs(const torch::Tensor& logits, const torch::Tensor& targets,
                             double temperature, NumericMode mode);

// log_softmax(logits / temperature) over the last dimension in float32, for sampling (float32
// CPU logits run the kernel in both modes, which has no backward); in batch-invariant mode its
// entries equal TargetLogProbs's bit for bit (sampler and trainer agree).
torch::Tensor LogSoftmax(const torch::Tensor& logits, double temperature, NumericMode mode);

// A mixture-of-experts router's choice for each row of logits [rows, num_experts]: the k most
// probable experts (softmax in float32, lowest index first among equals) and their
// probabilities, renormalised when `normalize`. Both modes run the fixed-order kernel
// (kernels/moe_routing_ops.h): one tie rule everywhere, and the cost is small beside the experts.
kernels::TopKRouting TopKRouting(const torch::Tensor& logits, int64_t k, bool normalize);

// destination[rows[i]] = source[i] for every i (index_copy_ along dim 0), e.g. new keys into
// their cache slots. CPU float32 contiguous tensors take a row copy loop (a decode step writes
// 24 of these, a few rows each: index_copy_'s dispatch cost more than the copies).
void WriteRows(torch::Tensor& destination, const torch::Tensor& rows, const torch::Tensor& source);

// First index of the largest value of each row of x [rows, cols], int64 [rows] (torch::argmax's
// rule; exact, so the same in both modes). NaN never wins on float32 CPU and CUDA rows (our
// kernels).
torch::Tensor ArgMaxRows(const torch::Tensor& x);

}  // namespace lockstep::ops

#endif  // LOCKSTEP_MODEL_OPS_H_
