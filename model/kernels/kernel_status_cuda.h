// What a CUDA kernel launcher returns (model/kernels/*_cuda.h): OK, a shape or argument error
// found before anything was launched, or the CUDA error of a launch. Plain C++ and the CUDA
// runtime API, no LibTorch and no absl, so that the kernels compile with plain nvcc; the LibTorch
// glue (torch_cuda_stream.h) turns a failed status into an absl::Status / c10::Error.
//
// Launchers are asynchronous: OK means the kernel was queued on the stream; a fault while it
// runs surfaces at the next synchronizing call (cudaStreamSynchronize), as CUDA reports it.
#ifndef LOCKSTEP_MODEL_KERNELS_KERNEL_STATUS_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_KERNEL_STATUS_CUDA_H_

#include <cuda_runtime_api.h>

#include <string>

namespace lockstep::kernels::cuda {

struct KernelStatus {
  enum Code { kOk = 0, kInvalidArgument = 1, kCudaError = 2 };
  Code code = kOk;
  std::string message;  // empty when OK

  bool ok() const { return code == kOk; }
};

// kInvalidArgument "<kernel>: <what>".
KernelStatus InvalidArgument(const char* kernel, const std::string& what);
// OK for cudaSuccess, else kCudaError "<kernel>: <cudaGetErrorName>: <cudaGetErrorString>".
KernelStatus FromCuda(const char* kernel, cudaError_t error);
// FromCuda(kernel, cudaGetLastError()): call right after a <<<...>>> launch.
KernelStatus AfterLaunch(const char* kernel);

// Input element types the linear kernel reads (accumulation and output are always fp32).
enum class InputType { kFloat32, kBFloat16 };

}  // namespace lockstep::kernels::cuda

#endif  // LOCKSTEP_MODEL_KERNELS_KERNEL_STATUS_CUDA_H_
