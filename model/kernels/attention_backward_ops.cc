#include "model/kernels/attention_backward_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/kernels/attention_backward_cpu.h"
#include "model/kernels/parallel_grain.h"

namespace lockstep::kernels {
namespace {

// Queries a block of the backward takes together. A block's queries see keys 0 .. the block's
// last position only, so blocks skip the masked part of the score matrix: at 512 queries from
// position 0, four blocks compute 1280 of every 2048 key columns the whole matrix would (the
// fast-mode formula computes all of it). Blocks this tall keep the products large enough for
// BLAS to run near its peak (head_dim 64: [384 x 64] x [64 x keys] at group 3).
constexpr int64_t kQueryBlock = 128;

// [rows, num_kv_heads * group, d] -> [num_kv_heads, rows * group, d]: per kv head, its query
// heads' rows, query-major (row i * group + h is query i of the group's head h), so that a block
// of queries is a block of rows. (reshape: an incoming gradient need not be contiguous.)
torch::Tensor ByKvHead(const torch::Tensor& t, int64_t num_kv_heads) {
  const int64_t rows = t.size(0), group = t.size(1) / num_kv_heads, d = t.size(2);
  return t.reshape({rows, num_kv_heads, group, d})
      .permute({1, 0, 2, 3})
      .reshape({num_kv_heads, rows * group, d});
}

// f(row_begin, row_end) over `rows` rows of `length` floats, on LibTorch's threads.
template <typename F>
void ParallelRows(int64_t rows, int64_t length, const F& f) {
  at::parallel_for(0, rows, RowGrain(length), f);
}

// The inverse of ByKvHead.
torch::Tensor FromKvHead(const torch::Tensor& t, int64_t rows, int64_t group) {
  const int64_t num_kv_heads = t.size(0), d = t.size(2);
  return t.view({num_kv_heads, rows, group, d})
      .permute({1, 0, 2, 3})
      .reshape({rows, num_kv_heads * group, d});
}

// Adds the gradient of rows `rows` of `target` ([rows, kv, d]) from theirs by position
// (grad: [kv, positions, d]). Rows that are one ascending run (a training sequence's own keys)
// take a slice add; others index_add_ (on CUDA index_add_ adds in no fixed order).
void AddToRows(const torch::Tensor& grad, torch::Tensor& target, const torch::Tensor& rows) {
  const torch::Tensor by_position = grad.permute({1, 0, 2}).to(target.scalar_type());
  const int64_t positions = rows.size(0);
  const int64_t first = positions > 0 ? rows[0].item<int64_t>() : 0;
  if (first >= 0 && first + positions <= target.size(0) &&
      torch::equal(rows, torch::arange(first, first + positions, rows.options()))) {
    target.narrow(0, first, positions).add_(by_position);
    return;
  }
  target.index_add_(0, rows, by_position);
}

}  // namespace

AttentionGrads CausalAttentionBackward(const torch::Tensor& q, const torch::Tensor& keys,
                                       const torch::Tensor& values, const torch::Tensor& key_rows,
                                       int64_t first_position, const torch::Tensor& grad_out) {
  AttentionGrads grads;
  grads.keys = torch::zeros_like(keys);
  grads.values = torch::zeros_like(values);
  grads.q = CausalAttentionBackwardAdd(q, keys, values, key_rows, first_position, grad_out,
                                       grads.keys, grads.values);
  return grads;
}

torch::Tensor CausalAttentionBackwardAdd(const torch::Tensor& q, const torch::Tensor& keys,
                                         const torch::Tensor& values, const torch::Tensor& key_rows,
                                         int64_t first_position, const torch::Tensor& grad_out,
                                         torch::Tensor& grad_keys, torch::Tensor& grad_values) {
  torch::NoGradGuard no_grad;
  const int64_t num_queries = q.size(0);
  const int64_t num_kv_heads = keys.size(1);
  const int64_t group = q.size(1) / num_kv_heads;
  const int64_t head_dim = q.size(2);
  const int64_t num_keys = key_rows.size(0);  // first_position + num_queries
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const torch::Tensor rows = key_rows.to(keys.device());
  const torch::TensorOptions positions = torch::dtype(torch::kInt64).device(q.device());
  const bool on_cpu = q.is_cpu();  // the row passes in the CPU kernel, else in LibTorch ops

  // Per kv head: the group's queries stacked [kv, Lq * group, d] (scaled once here, so that
  // the scores need no pass of their own and dK comes out scaled; out of place: the stacking is
  // a view of q where there is one head), keys and values [kv, Lk, d].
  const torch::Tensor qs = ByKvHead(q.to(torch::kFloat32), num_kv_heads).mul(scale);
  const torch::Tensor k = keys.to(torch::kFloat32).index_select(0, rows).permute({1, 0, 2});
  const torch::Tensor v = values.to(torch::kFloat32).index_select(0, rows).permute({1, 0, 2});
  const torch::Tensor grad = ByKvHead(grad_out.to(torch::kFloat32), num_kv_heads);
  const torch::Tensor grad_q = torch::empty_like(qs);
  const torch::Tensor grad_k = torch::zeros({num_kv_heads, num_keys, head_dim}, qs.options());
  const torch::Tensor grad_v = torch::zeros_like(grad_k);

  for (int64_t begin = 0; begin < num_queries; begin += kQueryBlock) {
    const int64_t length = std::min(kQueryBlock, num_queries - begin);
    const int64_t seen = first_position + begin + length;  // keys the block's queries see
    const torch::Tensor q_block = qs.narrow(1, begin * group, length * group);
    const torch::Tensor grad_block = grad.narrow(1, begin * group, length * group);
    const torch::Tensor k_seen = k.narrow(1, 0, seen), v_seen = v.narrow(1, 0, seen);

    // Query i of the block (position first_position + begin + i) sees keys 0 .. its position.
    CausalRows causal;
    causal.length = seen;
    causal.rows_per_matrix = length * group;
    causal.rows_per_query = group;
    causal.first_visible = first_position + begin + 1;
    torch::Tensor probs = torch::bmm(q_block, k_seen.transpose(1, 2));  // [kv, rows, seen]
    if (on_cpu) {
      ParallelRows(probs.numel() / seen, seen, [&](int64_t row_begin, int64_t row_end) {
        CausalSoftmaxRows(probs.data_ptr<float>(), causal, row_begin, row_end);
      });
    } else {
      if (length > 1) {
        const torch::Tensor query_pos =
            torch::arange(first_position + begin, first_position + begin + length, positions)
                .view({length, 1, 1});
        const torch::Tensor key_pos = torch::arange(seen, positions);
        probs.view({num_kv_heads, length, group, seen})
            .masked_fill_(key_pos > query_pos, -std::numeric_limits<float>::infinity());
      }
      probs = torch::softmax(probs, -1);
    }

    grad_v.narrow(1, 0, seen).baddbmm_(probs.transpose(1, 2), grad_block);
    torch::Tensor grad_scores = torch::bmm(grad_block, v_seen.transpose(1, 2));  // dP, then dS
    if (on_cpu) {
      ParallelRows(grad_scores.numel() / seen, seen, [&](int64_t row_begin, int64_t row_end) {
        SoftmaxGradRows(probs.data_ptr<float>(), grad_scores.data_ptr<float>(), causal,
                        row_begin, row_end);
      });
    } else {
      grad_scores.mul_(probs);
      const torch::Tensor row_sums = grad_scores.sum(-1, /*keepdim=*/true);
      grad_scores.addcmul_(probs, row_sums, /*value=*/-1);
    }
    probs = torch::Tensor();
    grad_q.narrow(1, begin * group, length * group).copy_(torch::bmm(grad_scores, k_seen));
    grad_k.narrow(1, 0, seen).baddbmm_(grad_scores.transpose(1, 2), q_block);
  }

  AddToRows(grad_k, grad_keys, rows);
  AddToRows(grad_v, grad_values, rows);
  return FromKvHead(grad_q.mul_(scale), num_queries, group).to(q.scalar_type());
}

}  // namespace lockstep::kernels
