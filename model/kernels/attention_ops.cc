#include "model/kernels/attention_ops.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "model/kernels/attention_cpu.h"
#include "model/kernels/recompute_backward.h"
#include "model/ops.h"

namespace lockstep::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct AttentionFunction : public torch::autograd::Function<AttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor keys,
                               torch::Tensor values, torch::Tensor key_rows,
                               int64_t first_position) {
    ctx->save_for_backward({q, keys, values, key_rows});
    torch::Tensor qc = q.contiguous();
    torch::Tensor kc = keys.contiguous();
    torch::Tensor vc = values.contiguous();
    torch::Tensor rows = key_rows.contiguous();
    torch::Tensor out = torch::empty_like(qc);
    AttentionProblem problem;
    problem.q = qc.data_ptr<float>();
    problem.num_queries = q.size(0);
    problem.first_position = first_position;
    problem.keys = kc.data_ptr<float>();
    problem.values = vc.data_ptr<float>();
    problem.kv_row_stride = keys.size(1) * keys.size(2);
    problem.key_rows = rows.data_ptr<int64_t>();
    problem.num_heads = q.size(1);
    problem.num_kv_heads = keys.size(1);
    problem.head_dim = q.size(2);
    problem.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.size(2))));
    problem.out = out.data_ptr<float>();
    at::parallel_for(0, problem.num_queries * problem.num_heads, 1,
                     [&](int64_t begin, int64_t end) {
                       CausalAttentionItems(problem, begin, end);
                     });
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor key_rows = saved[3];
    saved.pop_back();
    auto g = RecomputeBackward(
        [&key_rows](const std::vector<torch::Tensor>& in) {
          return ops::CausalAttention(in[0], in[1].index_select(0, key_rows),
                                      in[2].index_select(0, key_rows));
        },
        saved, grads[0]);
    return {g[0], g[1], g[2], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor BatchInvariantAttention(const torch::Tensor& q, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& key_rows,
                                      int64_t first_position) {
  TORCH_CHECK(q.scalar_type() == torch::kFloat32 && keys.scalar_type() == torch::kFloat32,
              "batch-invariant attention needs float32");
  TORCH_CHECK(key_rows.size(0) == first_position + q.size(0),
              "attention: key_rows must name every position up to the last query");
  return AttentionFunction::apply(q, keys, values, key_rows, first_position);
}

}  // namespace lockstep::kernels
