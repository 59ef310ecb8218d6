// Small CUDA-device helpers shared by the GPU bucket transports (nccl_transport.h,
// cuda_ipc_transport.h): the current device for a scope, LibTorch's current stream (the model's
// kernels::TorchCurrentStream: model/kernels/torch_cuda_stream.h is the project's one file that
// depends on whether LibTorch has CUDA), device fp32 buffers as tensors. Everything here uses
// LibTorch's device-agnostic API, so it compiles against Debian's CPU-only LibTorch too.
//
// COMPILED ONLY: built with nvcc's toolkit on machines without a GPU; never run on one.
//
// Thread safety: a CudaDeviceScope belongs to the thread that made it; the functions are
// thread-safe.
#ifndef LOCKSTEP_WEIGHT_SYNC_GPU_DEVICE_H_
#define LOCKSTEP_WEIGHT_SYNC_GPU_DEVICE_H_

#include <cuda_runtime.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/kernels/torch_cuda_stream.h"

namespace lockstep::weight_sync {

// Makes `device` the calling thread's current CUDA device for the scope's lifetime and restores
// the previous one after. status(): CUDA's error when the switch failed (nothing to restore then).
class CudaDeviceScope {
 public:
  explicit CudaDeviceScope(int device);
  ~CudaDeviceScope();
  CudaDeviceScope(const CudaDeviceScope&) = delete;
  CudaDeviceScope& operator=(const CudaDeviceScope&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;
  absl::Status status_;
};

// "cuda:<GPU UUID in hex>" for `device`: one physical GPU, whatever CUDA_VISIBLE_DEVICES maps it
// to. FailedPrecondition when LibTorch has no CUDA, no device is visible, or `device` is not one
// of them; `what` begins each message.
absl::StatusOr<std::string> CudaDeviceIdentity(int device, const std::string& what);

// The stream LibTorch enqueues this thread's work on for a device. The transports enqueue their
// copies and broadcasts there, so they are ordered with LibTorch's packing and casting without
// extra events.
using kernels::TorchCurrentStream;

// A fresh fp32 tensor of `num_elements` on cuda:`device` (LibTorch's allocator).
torch::Tensor DeviceFloats(int64_t num_elements, int device);

// `num_elements` fp32 at `data` (device memory of cuda:`device`, owned by the caller) as a tensor.
torch::Tensor WrapDeviceFloats(void* data, int64_t num_elements, int device);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_GPU_DEVICE_H_
