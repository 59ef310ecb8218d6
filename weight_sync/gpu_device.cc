#include "weight_sync/gpu_device.h"

#include "absl/strings/str_cat.h"
#include "weight_sync/gpu_status.h"

namespace lockstep::weight_sync {

CudaDeviceScope::CudaDeviceScope(int device) {
  status_ = CudaStatus(cudaGetDevice(&previous_), "cudaGetDevice");
  if (status_.ok() && previous_ != device) {
    status_ = CudaStatus(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  }
  if (!status_.ok()) previous_ = -1;
}

CudaDeviceScope::~CudaDeviceScope() {
  int current = -1;
  if (previous_ >= 0 && cudaGetDevice(&current) == cudaSuccess && current != previous_) {
    cudaSetDevice(previous_);
  }
}

absl::StatusOr<std::string> CudaDeviceIdentity(int device, const std::string& what) {
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": this LibTorch has no CUDA (or sees no GPU), so weights cannot live on CUDA; "
              "build with -DTorch_DIR=<a CUDA LibTorch> on a machine with a GPU"));
  }
  int count = 0;
  absl::Status status = CudaStatus(cudaGetDeviceCount(&count), absl::StrCat(what, ": no GPU"));
  if (!status.ok()) return absl::FailedPreconditionError(status.message());
  if (device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": only ", count, " CUDA device(s) are visible"));
  }
  cudaDeviceProp properties;
  status = CudaStatus(cudaGetDeviceProperties(&properties, device),
                      absl::StrCat(what, ": cudaGetDeviceProperties"));
  if (!status.ok()) return status;
  std::string identity = "cuda:";
  for (unsigned char byte : properties.uuid.bytes) {
    absl::StrAppend(&identity, absl::Hex(byte, absl::kZeroPad2));
  }
  return identity;
}

torch::Tensor DeviceFloats(int64_t num_elements, int device) {
  return torch::empty({num_elements},
                      torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, device));
}

torch::Tensor WrapDeviceFloats(void* data, int64_t num_elements, int device) {
  return torch::from_blob(
      data, {num_elements},
      torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, device));
}

}  // namespace lockstep::weight_sync
