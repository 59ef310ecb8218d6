#include "model/kernels/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/kernels/attention_backward_ops.h"
#include "model/kernels/attention_cpu.h"
#include "model/kernels/kernel_team_ops.h"
#include "model/kernels/ops_cuda.h"
#include "model/kernels/wants_grad.h"

namespace lockstep::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The problem of `num_queries` queries of q and out starting at row `first_row` (every other
// size from q, keys and values, which are contiguous).
AttentionProblem MakeProblem(const torch::Tensor& q, const torch::Tensor& keys,
                             const torch::Tensor& values, const torch::Tensor& key_rows,
                             int64_t first_position, torch::Tensor& out, int64_t first_row,
                             int64_t num_queries) {
  const int64_t row_floats = q.size(1) * q.size(2);
  AttentionProblem problem;
  problem.q = q.data_ptr<float>() + first_row * row_floats;
  problem.num_queries = num_queries;
  problem.first_position = first_position;
  problem.keys = keys.data_ptr<float>();
  problem.values = values.data_ptr<float>();
  problem.kv_row_stride = keys.size(1) * keys.size(2);
  problem.key_rows = key_rows.data_ptr<int64_t>();
  problem.num_heads = q.size(1);
  problem.num_kv_heads = keys.size(1);
  problem.head_dim = q.size(2);
  problem.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.size(2))));
  problem.out = out.data_ptr<float>() + first_row * row_floats;
  return problem;
}

// Sequence s's key rows (first_positions[s] + its length of them) out of their concatenation.
std::vector<torch::Tensor> SplitKeyRows(const torch::Tensor& all_key_rows,
                                        const std::vector<int64_t>& first_positions,
                                        const std::vector<int64_t>& cu_seqlens) {
  std::vector<torch::Tensor> key_rows;
  int64_t offset = 0;
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const int64_t count = first_positions[s] + cu_seqlens[s + 1] - cu_seqlens[s];
    key_rows.push_back(all_key_rows.narrow(0, offset, count));
    offset += count;
  }
  return key_rows;
}

torch::Tensor RunAttentionPacked(const torch::Tensor& q, const torch::Tensor& keys,
                                 const torch::Tensor& values,
                                 const std::vector<torch::Tensor>& key_rows,
                                 const std::vector<int64_t>& first_positions,
                                 const std::vector<int64_t>& cu_seqlens) {
  if (q.is_cuda()) {
    return AttentionPackedOnCuda(q, keys, values, key_rows, first_positions, cu_seqlens);
  }
  const size_t num_sequences = cu_seqlens.size() - 1;
  const torch::Tensor qc = q.contiguous();
  const torch::Tensor kc = keys.contiguous();
  const torch::Tensor vc = values.contiguous();
  torch::Tensor out = torch::empty_like(qc);
  std::vector<AttentionProblem> problems(num_sequences);
  std::vector<int64_t> first_item(num_sequences + 1, 0);  // items are (token, head) pairs
  for (size_t s = 0; s < num_sequences; ++s) {
    const int64_t begin = cu_seqlens[s], length = cu_seqlens[s + 1] - begin;
    TORCH_CHECK(key_rows[s].is_contiguous(), "attention: key_rows must be contiguous");
    problems[s] = MakeProblem(qc, kc, vc, key_rows[s], first_positions[s], out, begin, length);
    first_item[s + 1] = first_item[s] + length * q.size(1);
  }
  // One contiguous range of items per thread (as at::parallel_for splits them), on the kernel
  // team where the calling thread leads one (kernel_team_ops.h).
  const int64_t items = first_item.back();
  const int64_t parts = std::min<int64_t>(ParallelPartsThreads(), items);
  ParallelParts(parts, [&](int64_t part) {
    const int64_t begin = items * part / parts, end = items * (part + 1) / parts;
    // The sequence holding item `begin`, then each sequence's share of [begin, end).
    size_t s = std::upper_bound(first_item.begin(), first_item.end(), begin) -
               first_item.begin() - 1;
    for (; s < num_sequences && first_item[s] < end; ++s) {
      const int64_t from = std::max(begin, first_item[s]) - first_item[s];
      const int64_t to = std::min(end, first_item[s + 1]) - first_item[s];
      CausalAttentionItems(problems[s], from, to);
    }
  });
  return out;
}

// The packed attention with a graph: the sequences' key rows travel as one tensor (autograd takes
// tensors one by one), each sequence's backward adds into one pair of key and value gradients.
struct PackedAttentionFunction : public torch::autograd::Function<PackedAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor keys,
                               torch::Tensor values, torch::Tensor all_key_rows,
                               std::vector<int64_t> first_positions,
                               std::vector<int64_t> cu_seqlens) {
    ctx->save_for_backward({q, keys, values, all_key_rows});
    ctx->saved_data["first_positions"] = first_positions;
    ctx->saved_data["cu_seqlens"] = cu_seqlens;
    return RunAttentionPacked(q, keys, values, SplitKeyRows(all_key_rows, first_positions,
                                                            cu_seqlens),
                              first_positions, cu_seqlens);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::vector<int64_t> first_positions = ctx->saved_data["first_positions"].toIntVector();
    const std::vector<int64_t> cu_seqlens = ctx->saved_data["cu_seqlens"].toIntVector();
    const std::vector<torch::Tensor> key_rows =
        SplitKeyRows(saved[3], first_positions, cu_seqlens);
    torch::Tensor grad_q = torch::empty_like(saved[0]);
    torch::Tensor grad_keys = torch::zeros_like(saved[1]);
    torch::Tensor grad_values = torch::zeros_like(saved[2]);
    for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
      const int64_t begin = cu_seqlens[s], length = cu_seqlens[s + 1] - begin;
      grad_q.narrow(0, begin, length)
          .copy_(CausalAttentionBackwardAdd(saved[0].narrow(0, begin, length), saved[1], saved[2],
                                            key_rows[s], first_positions[s],
                                            grads[0].narrow(0, begin, length), grad_keys,
                                            grad_values));
    }
    return {grad_q, grad_keys, grad_values, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor FixedOrderAttentionPacked(const torch::Tensor& q, const torch::Tensor& keys,
                                        const torch::Tensor& values,
                                        const std::vector<torch::Tensor>& key_rows,
                                        const std::vector<int64_t>& first_positions,
                                        const std::vector<int64_t>& cu_seqlens) {
  TORCH_CHECK(q.scalar_type() == torch::kFloat32 && keys.scalar_type() == torch::kFloat32 &&
                  values.scalar_type() == torch::kFloat32,
              "batch-invariant attention needs float32");
  TORCH_CHECK(!cu_seqlens.empty(), "attention: cu_seqlens must hold at least the 0 it starts at");
  const size_t num_sequences = cu_seqlens.size() - 1;
  TORCH_CHECK(key_rows.size() == num_sequences &&
                  first_positions.size() == num_sequences && cu_seqlens.back() == q.size(0),
              "attention: one key_rows and first position per sequence of cu_seqlens");
  for (size_t s = 0; s < num_sequences; ++s) {
    TORCH_CHECK(key_rows[s].scalar_type() == torch::kInt64 && key_rows[s].dim() == 1 &&
                    key_rows[s].size(0) == first_positions[s] + cu_seqlens[s + 1] - cu_seqlens[s],
                "attention: key_rows must name every position up to the last query");
  }
  if (!WantsGrad(q, keys, values)) {
    return RunAttentionPacked(q, keys, values, key_rows, first_positions, cu_seqlens);
  }
  // (The rows stay where they are, as the forward takes them; the backward moves each
  // sequence's to the keys' device.)
  const torch::Tensor all_key_rows = torch::cat(key_rows);
  return PackedAttentionFunction::apply(q, keys, values, all_key_rows, first_positions,
                                        cu_seqlens);
}

torch::Tensor FixedOrderAttention(const torch::Tensor& q, const torch::Tensor& keys,
                                  const torch::Tensor& values, const torch::Tensor& key_rows,
                                  int64_t first_position) {
  // One sequence of the packed call (the same kernel items, the same backward).
  return FixedOrderAttentionPacked(q, keys, values, {key_rows.contiguous()}, {first_position},
                                   {0, q.size(0)});
}

}  // namespace lockstep::kernels
