#include "model/kernels/kernel_status_cuda.h"

#include <cuda_runtime.h>

namespace lockstep::kernels::cuda {

KernelStatus InvalidArgument(const char* kernel, const std::string& what) {
  return {KernelStatus::kInvalidArgument, std::string(kernel) + ": " + what};
}

KernelStatus FromCuda(const char* kernel, cudaError_t error) {
  if (error == cudaSuccess) return {};
  return {KernelStatus::kCudaError, std::string(kernel) + ": " + cudaGetErrorName(error) + ": " +
                                        cudaGetErrorString(error)};
}

KernelStatus AfterLaunch(const char* kernel) { return FromCuda(kernel, cudaGetLastError()); }

}  // namespace lockstep::kernels::cuda
