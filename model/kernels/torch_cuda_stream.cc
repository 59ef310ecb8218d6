#include "model/kernels/torch_cuda_stream.h"

#ifdef LOCKSTEP_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace lockstep::kernels {

cudaStream_t TorchCurrentStream(int device) {
#ifdef LOCKSTEP_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return cudaStreamLegacy;
#endif
}

CudaLaunchScope::CudaLaunchScope(const torch::Tensor& tensor) {
  TORCH_CHECK(tensor.is_cuda(), "CUDA kernel launch on a ", tensor.device(), " tensor");
  const int device = tensor.get_device();
  int current = -1;
  cudaError_t error = cudaGetDevice(&current);
  if (error == cudaSuccess && current != device) {
    error = cudaSetDevice(device);
    if (error == cudaSuccess) previous_device_ = current;
  }
  TORCH_CHECK(error == cudaSuccess, "making cuda:", device, " current for a kernel launch: ",
              cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  stream_ = TorchCurrentStream(device);
}

CudaLaunchScope::~CudaLaunchScope() {
  if (previous_device_ >= 0) cudaSetDevice(previous_device_);
}

void CheckKernelStatus(const cuda::KernelStatus& status) {
  TORCH_CHECK(status.ok(), status.message);
}

}  // namespace lockstep::kernels
