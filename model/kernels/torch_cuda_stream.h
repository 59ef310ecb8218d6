// What the CUDA glue (*_ops_cuda.cc) needs beyond LibTorch's device-agnostic API: the stream
// LibTorch enqueues the calling thread's work on, the tensor's device made current for a launch,
// and a failed launch turned into a c10::Error. The only file of model/ that depends on whether
// LibTorch has CUDA (LOCKSTEP_TORCH_CUDA: c10/cuda's current stream; its name and header are
// the LibTorch-version-specific part). Built whenever nvcc is found.
//
// COMPILED ONLY: no GPU has run this yet.
//
// Thread safety: a CudaLaunchScope belongs to the thread that made it; the functions are
// thread-safe.
#ifndef LOCKSTEP_MODEL_KERNELS_TORCH_CUDA_STREAM_H_
#define LOCKSTEP_MODEL_KERNELS_TORCH_CUDA_STREAM_H_

#include <cuda_runtime_api.h>
#include <torch/torch.h>

#include "model/kernels/kernel_status_cuda.h"

namespace lockstep::kernels {

// The stream LibTorch enqueues this thread's work on for CUDA device `device`: c10::cuda's
// current stream with a CUDA LibTorch; the legacy default stream otherwise (LibTorch's default
// when nobody set one). Launching there orders a kernel after the LibTorch ops that made its
// inputs and before those that read its output, with no extra event.
cudaStream_t TorchCurrentStream(int device);

// For launches on `tensor`'s device (a CUDA tensor: TORCH_CHECKed): makes that device current
// for the scope's lifetime and restores the previous one after; stream() is TorchCurrentStream
// of it. A failed device switch is a c10::Error.
class CudaLaunchScope {
 public:
  explicit CudaLaunchScope(const torch::Tensor& tensor);
  ~CudaLaunchScope();
  CudaLaunchScope(const CudaLaunchScope&) = delete;
  CudaLaunchScope& operator=(const CudaLaunchScope&) = delete;

  cudaStream_t stream() const { return stream_; }

 private:
  int previous_device_ = -1;
  cudaStream_t stream_ = nullptr;
};

// TORCH_CHECK(status.ok()) with the launcher's message: a bad shape found before the launch, or
// CUDA's error of the launch.
void CheckKernelStatus(const cuda::KernelStatus& status);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_TORCH_CUDA_STREAM_H_
