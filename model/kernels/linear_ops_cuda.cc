// LinearOnCuda (ops_cuda.h): the fixed-order linear's forward on CUDA tensors (linear_cuda.h).
#include "model/kernels/linear_cuda.h"
#include "model/kernels/ops_cuda.h"
#include "model/kernels/torch_cuda_stream.h"

namespace lockstep::kernels {

torch::Tensor LinearOnCuda(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "batch-invariant linear on CUDA: x must be [M, K] and weight [N, K]");
  TORCH_CHECK(weight.device() == x.device() && (!bias.defined() || bias.device() == x.device()),
              "batch-invariant linear on CUDA: x (", x.device(), "), weight (", weight.device(),
              ") and bias must be on one device");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() &&
                  (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kBFloat16),
              "batch-invariant linear on CUDA: x and weight must be both float32 or both bfloat16");
  TORCH_CHECK(!bias.defined() || (bias.scalar_type() == torch::kFloat32 && bias.dim() == 1 &&
                                  bias.size(0) == weight.size(0)),
              "batch-invariant linear on CUDA: bias must be [N] float32");
  const CudaLaunchScope launch(x);
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = weight.contiguous();
  const torch::Tensor bc = bias.defined() ? bias.contiguous() : torch::Tensor();
  torch::Tensor y = torch::empty({xc.size(0), wc.size(0)}, xc.options().dtype(torch::kFloat32));
  if (y.numel() == 0) return y;
  cuda::LinearCudaProblem problem;
  problem.x = xc.data_ptr();
  problem.x_stride = xc.size(1);
  problem.rows = xc.size(0);
  problem.weight = wc.data_ptr();
  problem.out_features = wc.size(0);
  problem.in_features = wc.size(1);
  problem.bias = bc.defined() ? bc.data_ptr<float>() : nullptr;
  problem.y = y.data_ptr<float>();
  problem.y_stride = wc.size(0);
  const cuda::InputType input_type = xc.scalar_type() == torch::kBFloat16
                                         ? cuda::InputType::kBFloat16
                                         : cuda::InputType::kFloat32;
  CheckKernelStatus(cuda::LinearCuda(problem, input_type, launch.stream()));
  return y;
}

}  // namespace lockstep::kernels
