// RotateHalfFromTableOnCuda (ops_cuda.h): the table rotary embedding on CUDA tensors
// (rope_cuda.h).
#include "model/kernels/ops_cuda.h"
#include "model/kernels/rope_cuda.h"
#include "model/kernels/torch_cuda_stream.h"

namespace lockstep::kernels {

torch::Tensor RotateHalfFromTableOnCuda(const torch::Tensor& x, const torch::Tensor& cos,
                                        const torch::Tensor& sin, const torch::Tensor& positions) {
  TORCH_CHECK(sin.device() == cos.device(), "rotary embedding on CUDA: cos is on ", cos.device(),
              ", sin on ", sin.device());
  const CudaLaunchScope launch(x);
  torch::Tensor cos_rows = cos, sin_rows = sin, table_positions;
  if (cos.device() == x.device()) {
    table_positions = positions.to(x.device());
  } else {
    // Host tables (RopeTable keeps them there): upload the rows of these tokens only, indexed
    // 0 .. num_tokens - 1. index_select checks every position against the table.
    const torch::Tensor host_positions = positions.to(cos.device());
    cos_rows = cos.index_select(0, host_positions).to(x.device());
    sin_rows = sin.index_select(0, host_positions).to(x.device());
    table_positions = torch::arange(x.size(0), positions.options().device(x.device()));
  }
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor cc = cos_rows.contiguous(), sc = sin_rows.contiguous();
  const torch::Tensor pc = table_positions.contiguous();
  torch::Tensor out = torch::empty_like(xc);
  if (out.numel() == 0) return out;
  cuda::RopeCudaProblem problem;
  problem.x = xc.data_ptr<float>();
  problem.cos = cc.data_ptr<float>();
  problem.sin = sc.data_ptr<float>();
  problem.positions = pc.data_ptr<int64_t>();
  problem.num_tokens = xc.size(0);
  problem.num_heads = xc.size(1);
  problem.head_dim = xc.size(2);
  problem.max_positions = cc.size(0);
  problem.out = out.data_ptr<float>();
  CheckKernelStatus(cuda::RopeCuda(problem, launch.stream()));
  return out;
}

}  // namespace lockstep::kernels
