#include "model/kernels/rope_ops.h"

#include <ATen/Parallel.h>

#include "model/kernels/ops_cuda.h"
#include "model/kernels/parallel_grain.h"
#include "model/kernels/rope_cpu.h"

namespace lockstep::kernels {

torch::Tensor RotateHalfFromTable(const torch::Tensor& x, const torch::Tensor& cos,
                                  const torch::Tensor& sin, const torch::Tensor& positions) {
  TORCH_CHECK(x.dim() == 3 && x.scalar_type() == torch::kFloat32 && x.size(2) % 2 == 0,
              "rotary embedding: x must be [tokens, heads, even head_dim] float32");
  TORCH_CHECK(cos.scalar_type() == torch::kFloat32 && sin.sizes() == cos.sizes() &&
                  cos.dim() == 2 && cos.size(1) == x.size(2),
              "rotary embedding: cos/sin tables must be [positions, head_dim] float32");
  TORCH_CHECK(positions.scalar_type() == torch::kInt64 && positions.dim() == 1 &&
                  positions.size(0) == x.size(0),
              "rotary embedding: positions must be [tokens] int64");
  if (x.is_cuda()) return RotateHalfFromTableOnCuda(x, cos, sin, positions);
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor cc = cos.contiguous(), sc = sin.contiguous();
  const torch::Tensor pc = positions.contiguous();
  const int64_t* p = pc.data_ptr<int64_t>();
  const int64_t num_tokens = x.size(0);
  for (int64_t t = 0; t < num_tokens; ++t) {
    TORCH_CHECK(p[t] >= 0 && p[t] < cos.size(0), "rotary embedding: position ", p[t],
                " is outside the table of ", cos.size(0));
  }
  torch::Tensor out = torch::empty_like(xc);
  RopeProblem problem;
  problem.x = xc.data_ptr<float>();
  problem.cos = cc.data_ptr<float>();
  problem.sin = sc.data_ptr<float>();
  problem.positions = p;
  problem.num_heads = x.size(1);
  problem.head_dim = x.size(2);
  problem.out = out.data_ptr<float>();
  const int64_t grain = RowGrain(x.size(1) * x.size(2));  // one row per token
  at::parallel_for(0, num_tokens, grain, [&](int64_t begin, int64_t end) {
    RotateHalfTokens(problem, begin, end);
  });
  return out;
}

}  // namespace lockstep::kernels
