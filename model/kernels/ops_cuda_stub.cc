// ops_cuda.h for a build without nvcc (LOCKSTEP_HAVE_CUDA off: no CUDA toolkit found, or
// -DLOCKSTEP_CUDA=OFF): a CUDA tensor reaching a batch-invariant op is an error that says so,
// never a silent fallback to other arithmetic.
#include "model/kernels/ops_cuda.h"

namespace lockstep::kernels {
namespace {

[[noreturn]] void NoCudaKernels(const char* op) {
  TORCH_CHECK(false, "batch-invariant ", op,
              " got a CUDA tensor, but lockstep_model was built without its CUDA kernels (no "
              "nvcc found, or -DLOCKSTEP_CUDA=OFF); rebuild with the CUDA toolkit and "
              "-DTorch_DIR=<a CUDA LibTorch>");
}

}  // namespace

torch::Tensor LinearOnCuda(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) {
  NoCudaKernels("linear");
}

torch::Tensor RmsNormOnCuda(const torch::Tensor&, const torch::Tensor&, double) {
  NoCudaKernels("RMSNorm");
}

torch::Tensor SiluMulOnCuda(const torch::Tensor&, const torch::Tensor&) {
  NoCudaKernels("SiLU*mul");
}

torch::Tensor TargetLogProbsOnCuda(const torch::Tensor&, const torch::Tensor&, double) {
  NoCudaKernels("log-softmax");
}

torch::Tensor LogSoftmaxOnCuda(const torch::Tensor&, double) { NoCudaKernels("log-softmax"); }

torch::Tensor ArgMaxRowsOnCuda(const torch::Tensor&) { NoCudaKernels("argmax"); }

torch::Tensor RotateHalfFromTableOnCuda(const torch::Tensor&, const torch::Tensor&,
                                        const torch::Tensor&, const torch::Tensor&) {
  NoCudaKernels("rotary embedding");
}

torch::Tensor AttentionPackedOnCuda(const torch::Tensor&, const torch::Tensor&,
                                    const torch::Tensor&, const std::vector<torch::Tensor>&,
                                    const std::vector<int64_t>&, const std::vector<int64_t>&) {
  NoCudaKernels("attention");
}

}  // namespace lockstep::kernels
