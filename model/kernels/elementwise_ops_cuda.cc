// The row and element ops of ops_cuda.h on CUDA tensors: RMSNorm (rms_norm_cuda.h), SiLU·mul
// (silu_mul_cuda.h), log-softmax and target log-probs (log_softmax_cuda.h), argmax
// (argmax_cuda.h).
#include "model/kernels/argmax_cuda.h"
#include "model/kernels/log_softmax_cuda.h"
#include "model/kernels/ops_cuda.h"
#include "model/kernels/rms_norm_cuda.h"
#include "model/kernels/silu_mul_cuda.h"
#include "model/kernels/torch_cuda_stream.h"

namespace lockstep::kernels {
namespace {

// `other` is a float32 tensor on `x`'s device.
void CheckFloatBeside(const torch::Tensor& x, const torch::Tensor& other, const char* what) {
  TORCH_CHECK(other.scalar_type() == torch::kFloat32 && other.device() == x.device(), what,
              " on CUDA: every input must be float32 on ", x.device(), ", got ",
              other.scalar_type(), " on ", other.device());
}

int64_t Rows(const torch::Tensor& x) { return x.numel() / x.size(-1); }

}  // namespace

torch::Tensor RmsNormOnCuda(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  CheckFloatBeside(x, weight, "RMSNorm");
  TORCH_CHECK(x.dim() >= 1 && weight.numel() == x.size(-1),
              "RMSNorm on CUDA: weight must have the last dimension's ", x.size(-1), " elements");
  const CudaLaunchScope launch(x);
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = weight.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  if (y.numel() == 0) return y;
  CheckKernelStatus(cuda::RmsNormCuda(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                      y.data_ptr<float>(), Rows(xc), xc.size(-1),
                                      static_cast<float>(eps), launch.stream()));
  return y;
}

torch::Tensor SiluMulOnCuda(const torch::Tensor& gate, const torch::Tensor& up) {
  CheckFloatBeside(gate, up, "SiLU*mul");
  TORCH_CHECK(gate.sizes() == up.sizes(), "SiLU*mul on CUDA: gate ", gate.sizes(), " and up ",
              up.sizes(), " differ");
  const CudaLaunchScope launch(gate);
  const torch::Tensor g = gate.contiguous();
  const torch::Tensor u = up.contiguous();
  torch::Tensor out = torch::empty_like(g);
  if (out.numel() == 0) return out;
  CheckKernelStatus(cuda::SiluMulCuda(g.data_ptr<float>(), u.data_ptr<float>(),
                                      out.data_ptr<float>(), g.numel(), launch.stream()));
  return out;
}

torch::Tensor TargetLogProbsOnCuda(const torch::Tensor& logits, const torch::Tensor& targets,
                                   double temperature) {
  TORCH_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0) &&
                  targets.scalar_type() == torch::kInt64,
              "log-softmax on CUDA: logits must be [rows, vocab] and targets [rows] int64");
  const CudaLaunchScope launch(logits);
  const torch::Tensor l = logits.contiguous();
  const torch::Tensor t = targets.to(logits.device()).contiguous();
  torch::Tensor out = torch::empty({l.size(0)}, l.options());
  if (out.numel() == 0) return out;
  CheckKernelStatus(cuda::TargetLogProbsCuda(l.data_ptr<float>(), t.data_ptr<int64_t>(),
                                             out.data_ptr<float>(), l.size(0), l.size(1),
                                             static_cast<float>(temperature), launch.stream()));
  return out;
}

torch::Tensor LogSoftmaxOnCuda(const torch::Tensor& logits, double temperature) {
  TORCH_CHECK(logits.dim() >= 1, "log-softmax on CUDA: logits need a vocabulary dimension");
  const CudaLaunchScope launch(logits);
  const torch::Tensor l = logits.contiguous();
  torch::Tensor out = torch::empty_like(l);
  if (out.numel() == 0) return out;
  CheckKernelStatus(cuda::LogSoftmaxCuda(l.data_ptr<float>(), out.data_ptr<float>(), Rows(l),
                                         l.size(-1), static_cast<float>(temperature),
                                         launch.stream()));
  return out;
}

torch::Tensor ArgMaxRowsOnCuda(const torch::Tensor& x) {
  const CudaLaunchScope launch(x);
  const torch::Tensor xc = x.contiguous();
  torch::Tensor out = torch::empty({xc.size(0)}, xc.options().dtype(torch::kInt64));
  if (out.numel() == 0) return out;
  CheckKernelStatus(cuda::ArgMaxCuda(xc.data_ptr<float>(), xc.size(0), xc.size(1),
                                     out.data_ptr<int64_t>(), launch.stream()));
  return out;
}

}  // namespace lockstep::kernels
