#include "weight_sync/cuda_ipc.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "weight_sync/gpu_status.h"

namespace lockstep::weight_sync {
namespace {

void PutLittleEndian64(uint64_t value, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

}  // namespace

absl::StatusOr<std::string> ExportCudaIpcHandle(const void* allocation, size_t bytes) {
  if (allocation == nullptr) return absl::InvalidArgumentError("CUDA IPC export: null pointer");
  if (bytes == 0) return absl::InvalidArgumentError("CUDA IPC export: zero bytes");
  cudaPointerAttributes attributes;
  absl::Status status = CudaStatus(cudaPointerGetAttributes(&attributes, allocation),
                                   "CUDA IPC export: cudaPointerGetAttributes");
  if (!status.ok()) return status;
  if (attributes.type != cudaMemoryTypeDevice) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA IPC export: not device memory (cudaMemoryType ",
                     static_cast<int>(attributes.type), ")"));
  }
  cudaIpcMemHandle_t handle;
  status = CudaStatus(cudaIpcGetMemHandle(&handle, const_cast<void*>(allocation)),
                      absl::StrCat("CUDA IPC export of ", bytes, " bytes: cudaIpcGetMemHandle"));
  if (!status.ok()) return status;
  std::string out(kCudaIpcHandleBytes, '\0');
  std::memcpy(out.data(), handle.reserved, CUDA_IPC_HANDLE_SIZE);
  PutLittleEndian64(bytes, out.data() + CUDA_IPC_HANDLE_SIZE);
  return out;
}

absl::Status CheckIpcCopyArguments(const void* destination, size_t offset, size_t bytes,
                                   size_t size) {
  if (destination == nullptr) {
    return absl::InvalidArgumentError("CUDA IPC copy: null destination");
  }
  if (bytes == 0) return absl::InvalidArgumentError("CUDA IPC copy: zero bytes");
  if (offset > size || bytes > size - offset) {  // no overflow in offset + bytes
    return absl::InvalidArgumentError(absl::StrCat("CUDA IPC copy: bytes [", offset, ", ", offset,
                                                   " + ", bytes, ") outside the ", size,
                                                   "-byte buffer"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaIpcBuffer>> CudaIpcBuffer::Open(absl::string_view handle_bytes) {
  if (handle_bytes.size() != kCudaIpcHandleBytes) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA IPC open: handle of ", handle_bytes.size(),
                                                   " bytes, expected ", kCudaIpcHandleBytes));
  }
  const uint64_t size = GetLittleEndian64(handle_bytes.data() + CUDA_IPC_HANDLE_SIZE);
  if (size == 0) return absl::InvalidArgumentError("CUDA IPC open: handle of a zero-byte buffer");
  cudaIpcMemHandle_t handle;
  std::memcpy(handle.reserved, handle_bytes.data(), CUDA_IPC_HANDLE_SIZE);
  void* data = nullptr;
  absl::Status status =
      CudaStatus(cudaIpcOpenMemHandle(&data, handle, cudaIpcMemLazyEnablePeerAccess),
                 absl::StrCat("CUDA IPC open of a ", size, "-byte buffer: cudaIpcOpenMemHandle"));
  if (!status.ok()) return status;
  return std::unique_ptr<CudaIpcBuffer>(new CudaIpcBuffer(data, size));
}

CudaIpcBuffer::~CudaIpcBuffer() { Close().IgnoreError(); }

absl::Status CudaIpcBuffer::CopyTo(void* destination, size_t offset, size_t bytes,
                                   cudaStream_t stream, absl::Time deadline) {
  absl::Status status = CheckIpcCopyArguments(destination, offset, bytes, size_);
  if (!status.ok()) return status;
  const std::string operation =
      absl::StrCat("CUDA IPC copy of ", bytes, " bytes at offset ", offset);
  if (data_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(operation, ": the buffer was closed"));
  }
  status = CudaStatus(cudaMemcpyAsync(destination, static_cast<const char*>(data_) + offset, bytes,
                                      cudaMemcpyDeviceToDevice, stream),
                      absl::StrCat(operation, ": cudaMemcpyAsync"));
  if (!status.ok()) return status;
  return WaitForStream(stream, deadline, operation);
}

absl::Status CudaIpcBuffer::Close() {
  if (data_ == nullptr) return absl::OkStatus();
  void* data = data_;
  data_ = nullptr;
  return CudaStatus(cudaIpcCloseMemHandle(data),
                    absl::StrCat("CUDA IPC close of a ", size_, "-byte buffer"));
}

}  // namespace lockstep::weight_sync
