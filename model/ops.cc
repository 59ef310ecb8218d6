#include "model/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "model/kernels/attention_ops.h"
#include "model/kernels/elementwise_ops.h"
#include "model/kernels/wants_grad.h"

namespace lockstep::ops {
namespace {

bool Invariant(NumericMode mode) { return mode == NumericMode::kBatchInvariant; }

// Fast mode sends inputs of at most this many rows (decode steps) to our kernel: stock sgemm
// re-packs the whole weight on every call, which dominates when the batch is small
// (bench_linear_raw: 1x1024x1024 12 GFLOP/s stock vs 49 ours; 8 rows 45 vs 202; at 512 rows
// they are even except the LM head, where stock wins).
constexpr int64_t kFastKernelMaxRows = 64;

// In a paged forward (the generator's) fast mode runs the linear kernel at any size: stock
// sgemm's own thread pool shared the cores with LibTorch's OpenMP team and its workers spun on
// into the next decode steps (bench_generator, one run each: a 256-token prefill took
// 0.31-0.54 s in fast mode against 0.17-0.18 s in batch-invariant mode, and b8 decode ran
// 467-491 tok/s against 506-515).

// Fast mode's one-sequence attention over cache rows (AttentionOverRows; paged forwards take
// PackedAttentionOverRows, the kernel at any length) runs the kernel for at most this many
// queries: the stock path gathers the sequence's keys and values into copies every layer and
// step (bench_kernels: attention_decode_ms 5.5 stock vs 0.23 kernel). A training sequence's
// float32 CPU attention (keys read in place) runs the kernel at any length, forward and its
// backward (bench_kernels --threads 1, AMD EPYC Zen 5, 512 queries x 12/4 heads x 64: forward +
// backward 29.7-38.2 ms through the formula and autograd, 17.5-22.2 through the kernel).
constexpr int64_t kFastKernelMaxQueries = 16;

// Fast mode runs float32 CPU RMSNorm in the kernel at every size. Until the kernel reduced
// 64-float rows in registers (2026-12-07) Qwen3's per-head q/k norms of many rows took the
// formula; now bench_kernels --threads 1 (AMD EPYC Zen 5) puts the kernel ahead at every size:
// q_norm of 256 tokens (3072 rows of 64) 79.3 us formula vs 35.7 kernel, of 8 tokens 11.4 vs
// 1.7, and forward + backward of 512 tokens 0.97 ms vs 0.35.

int64_t Rows(const torch::Tensor& x) { return x.dim() == 0 ? 1 : x.numel() / x.size(-1); }

bool CpuFloat(const torch::Tensor& t) { return t.is_cpu() && t.scalar_type() == torch::kFloat32; }

// Whether Linear runs our kernel for x through `weight`.
bool LinearInKernel(const torch::Tensor& x, const torch::Tensor& weight, NumericMode mode,
                    ForwardKind kind) {
  return Invariant(mode) || (CpuFloat(x) && CpuFloat(weight) &&
                             (Rows(x) <= kFastKernelMaxRows || kind == ForwardKind::kPaged));
}

}  // namespace

torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     NumericMode mode, ForwardKind kind) {
  if (LinearInKernel(x, weight, mode, kind)) return kernels::FixedOrderLinear(x, weight, bias);
  return torch::nn::functional::linear(x, weight, bias);
}

std::vector<torch::Tensor> Linears(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                                   const std::vector<torch::Tensor>& biases, NumericMode mode,
                                   ForwardKind kind) {
  TORCH_CHECK(biases.size() == weights.size(), "linears: ", weights.size(), " weights but ",
              biases.size(), " biases");
  bool all_in_kernel = true;
  for (const torch::Tensor& weight : weights) {
    all_in_kernel = all_in_kernel && LinearInKernel(x, weight, mode, kind);
  }
  if (all_in_kernel) return kernels::FixedOrderLinears(x, weights, biases);
  std::vector<torch::Tensor> outputs;
  for (size_t i = 0; i < weights.size(); ++i) {
    outputs.push_back(Linear(x, weights[i], biases[i], mode, kind));
  }
  return outputs;
}

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                      NumericMode mode) {
  if (Invariant(mode) || (CpuFloat(x) && CpuFloat(weight))) {
    return kernels::FixedOrderRmsNorm(x, weight, eps);
  }
  return RmsNormFormula(x, weight, eps);
}

torch::Tensor RmsNormFormula(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor xf = x.to(torch::kFloat32);
  torch::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  torch::Tensor normed = xf * torch::rsqrt(variance + eps);
  return weight * normed.to(x.scalar_type());
}

torch::Tensor SiluMul(const torch::Tensor& gate, const torch::Tensor& up, NumericMode mode) {
  if (Invariant(mode) || (CpuFloat(gate) && CpuFloat(up))) {
    return kernels::FixedOrderSiluMul(gate, up);
  }
  return SiluMulFormula(gate, up);
}

torch::Tensor SiluMulFormula(const torch::Tensor& gate, const torch::Tensor& up) {
  return torch::silu(gate) * up;
}

torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v) {
  const int64_t num_queries = q.size(0);
  const int64_t num_keys = k.size(0);
  const int64_t num_heads = q.size(1);
  const int64_t num_kv_heads = k.size(1);
  const int64_t head_dim = q.size(2);
  const int64_t group = num_heads / num_kv_heads;
  // [kv_heads, group, Lq, d] x [kv_heads, 1, d, Lk] -> scores [kv_heads, group, Lq, Lk]
  torch::Tensor qh = q.to(torch::kFloat32)
                         .view({num_queries, num_kv_heads, group, head_dim})
                         .permute({1, 2, 0, 3});
  torch::Tensor kh = k.to(torch::kFloat32).permute({1, 2, 0}).unsqueeze(1);
  torch::Tensor vh = v.to(torch::kFloat32).permute({1, 0, 2}).unsqueeze(1);
  torch::Tensor scores = torch::matmul(qh, kh) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
  if (num_queries > 1) {
    // Query i (position num_keys - num_queries + i) must not see keys after it.
    const torch::TensorOptions positions = torch::dtype(torch::kInt64).device(q.device());
    torch::Tensor query_pos =
        torch::arange(num_keys - num_queries, num_keys, positions).unsqueeze(1);
    torch::Tensor key_pos = torch::arange(num_keys, positions).unsqueeze(0);
    scores = scores.masked_fill(key_pos > query_pos, -std::numeric_limits<float>::infinity());
  }
  torch::Tensor probs = torch::softmax(scores, -1);
  torch::Tensor out = torch::matmul(probs, vh);  // [kv_heads, group, Lq, d]
  return out.permute({2, 0, 1, 3}).reshape({num_queries, num_heads, head_dim}).to(q.scalar_type());
}

torch::Tensor AttentionOverRows(const torch::Tensor& q, const torch::Tensor& keys,
                                const torch::Tensor& values, const torch::Tensor& key_rows,
                                int64_t first_position, NumericMode mode) {
  // Fast mode's kernel calls: float32 CPU training calls and decode-sized paged ones.
  const bool fast_in_kernel =
      CpuFloat(q) && CpuFloat(keys) &&
      (key_rows.defined() ? q.size(0) <= kFastKernelMaxQueries : CpuFloat(values));
  if (Invariant(mode) || fast_in_kernel) {
    const torch::Tensor rows =
        key_rows.defined() ? key_rows : torch::arange(first_position + q.size(0), torch::kInt64);
    return kernels::FixedOrderAttention(q, keys, values, rows, first_position);
  }
  if (!key_rows.defined()) return CausalAttention(q, keys, values);
  return CausalAttention(q, keys.index_select(0, key_rows), values.index_select(0, key_rows));
}

namespace {

// Whether a packed batch's attention runs the kernel in one call (differentiable): float32 CPU
// tensors in both modes (paged: the generator's, at every length, prefill included, as Linear in
// a paged forward; training: forward and backward beat the formula's, see
// kFastKernelMaxQueries), and CUDA ones in batch-invariant mode (one launch).
bool PackedAttentionInKernel(const torch::Tensor& q, const torch::Tensor& keys,
                             const torch::Tensor& values, NumericMode mode) {
  return (CpuFloat(q) && CpuFloat(keys) && CpuFloat(values)) || (Invariant(mode) && q.is_cuda());
}

}  // namespace

torch::Tensor PackedAttentionOverRows(const torch::Tensor& q, const torch::Tensor& keys,
                                      const torch::Tensor& values,
                                      const std::vector<torch::Tensor>& key_rows,
                                      const std::vector<int64_t>& first_positions,
                                      const std::vector<int64_t>& cu_seqlens, NumericMode mode) {
  if (PackedAttentionInKernel(q, keys, values, mode)) {
    return kernels::FixedOrderAttentionPacked(q, keys, values, key_rows, first_positions,
                                              cu_seqlens);
  }
  std::vector<torch::Tensor> outputs;
  outputs.reserve(key_rows.size());
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const int64_t length = cu_seqlens[s + 1] - cu_seqlens[s];
    outputs.push_back(AttentionOverRows(q.narrow(0, cu_seqlens[s], length), keys, values,
                                        key_rows[s], first_positions[s], mode));
  }
  return torch::cat(outputs, 0);
}

torch::Tensor TrainingAttention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const std::vector<int64_t>& cu_seqlens,
                                NumericMode mode) {
  const size_t num_sequences = cu_seqlens.size() - 1;
  if (PackedAttentionInKernel(q, k, v, mode)) {
    std::vector<torch::Tensor> rows;  // sequence s's keys: its own rows of k
    rows.reserve(num_sequences);
    for (size_t s = 0; s < num_sequences; ++s) {
      rows.push_back(torch::arange(cu_seqlens[s], cu_seqlens[s + 1], torch::kInt64));
    }
    return kernels::FixedOrderAttentionPacked(q, k, v, rows,
                                              std::vector<int64_t>(num_sequences, 0), cu_seqlens);
  }
  std::vector<torch::Tensor> outputs;
  outputs.reserve(num_sequences);
  for (size_t s = 0; s < num_sequences; ++s) {
    const int64_t begin = cu_seqlens[s], length = cu_seqlens[s + 1] - begin;
    outputs.push_back(AttentionOverRows(q.narrow(0, begin, length), k.narrow(0, begin, length),
                                        v.narrow(0, begin, length), torch::Tensor(), 0, mode));
  }
  return torch::cat(outputs, 0);
}

torch::Tensor TargetLogProbs(const torch::Tensor& logits, const torch::Tensor& targets,
                             double temperature, NumericMode mode) {
  if (Invariant(mode)) return kernels::FixedOrderTargetLogProbs(logits, targets, temperature);
  torch::Tensor scaled = logits.to(torch::kFloat32);
  if (temperature != 1.0) scaled = scaled / temperature;
  return torch::log_softmax(scaled, -1).gather(1, targets.unsqueeze(1)).squeeze(1);
}

torch::Tensor LogSoftmax(const torch::Tensor& logits, double temperature, NumericMode mode) {
  // Fast mode runs the kernel too (8 x 32000 rows at 2 threads: stock 181 us, kernel 48).
  if (Invariant(mode) || CpuFloat(logits)) {
    return kernels::FixedOrderLogSoftmax(logits, temperature);
  }
  torch::Tensor scaled = logits.to(torch::kFloat32);
  if (temperature != 1.0) scaled = scaled / temperature;
  return torch::log_softmax(scaled, -1);
}

kernels::TopKRouting TopKRouting(const torch::Tensor& logits, int64_t k, bool normalize) {
  return kernels::FixedOrderTopKRouting(logits, k, normalize);
}

void WriteRows(torch::Tensor& destination, const torch::Tensor& rows, const torch::Tensor& source) {
  const bool plain = CpuFloat(destination) && CpuFloat(source) && destination.is_contiguous() &&
                     source.is_contiguous() && rows.is_cpu() && rows.is_contiguous() &&
                     rows.scalar_type() == torch::kInt64 && rows.dim() == 1 &&
                     source.dim() == destination.dim() && source.size(0) == rows.size(0) &&
                     source.numel() == rows.size(0) * (destination.numel() /
                                                       std::max<int64_t>(destination.size(0), 1));
  if (!plain) {
    destination.index_copy_(0, rows, source);
    return;
  }
  const int64_t row_floats = source.size(0) == 0 ? 0 : source.numel() / source.size(0);
  const int64_t* index = rows.data_ptr<int64_t>();
  const float* from = source.data_ptr<float>();
  float* to = destination.data_ptr<float>();
  for (int64_t i = 0; i < rows.size(0); ++i) {  // all checked before anything is written
    TORCH_CHECK(index[i] >= 0 && index[i] < destination.size(0), "WriteRows: row ", index[i],
                " is outside the destination's ", destination.size(0), " rows");
  }
  for (int64_t i = 0; i < rows.size(0); ++i) {
    std::memcpy(to + index[i] * row_floats, from + i * row_floats, row_floats * sizeof(float));
  }
}

torch::Tensor ArgMaxRows(const torch::Tensor& x) {
  // The kernel: LibTorch 1.13's argmax takes 160 us over 8 x 32000 rows, ours a few. On CUDA
  // too (float32), so that NaN never wins there either.
  if ((CpuFloat(x) || (x.is_cuda() && x.scalar_type() == torch::kFloat32)) && x.dim() == 2) {
    return kernels::ArgMaxRows(x);
  }
  return x.argmax(-1);
}

}  // namespace lockstep::ops
