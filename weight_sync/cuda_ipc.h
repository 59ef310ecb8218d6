// CUDA IPC: the raw layer under CudaIpcBucketTransport (cuda_ipc_transport.h) for a
// trainer and a generator sharing one GPU. The exporter turns a device allocation into bytes
// (cudaIpcGetMemHandle plus the buffer's size), sends them to the peer process (the rendezvous
// store), and the peer opens them (cudaIpcOpenMemHandle), copies device to device into its own
// memory and closes the mapping. Plain CUDA runtime; no LibTorch.
//
//   exporter:  bytes = ExportCudaIpcHandle(allocation, size);  publish bytes; keep `allocation`
//              alive and unwritten until the peer says it has copied
//   peer:      buffer = CudaIpcBuffer::Open(bytes);
//              buffer->CopyTo(my_device_memory, offset, n, stream, deadline);
//              buffer->Close();
//
// CUDA refuses to open a handle in the process that exported it: the two sides are different
// processes. Ordering between the exporter's writes and the peer's copy is the caller's protocol
// (the exporter synchronizes its stream before publishing, and reuses the memory only after the
// peer reports back).
//
// COMPILED ONLY: built and host-tested (argument checks) on machines without a GPU; no GPU has
// run it yet.
//
// Thread safety: a CudaIpcBuffer is used by one thread at a time.
#ifndef LOCKSTEP_WEIGHT_SYNC_CUDA_IPC_H_
#define LOCKSTEP_WEIGHT_SYNC_CUDA_IPC_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::weight_sync {

// The exported bytes: the cudaIpcMemHandle_t (CUDA_IPC_HANDLE_SIZE = 64 bytes), then the buffer's
// size in bytes as a little-endian uint64.
inline constexpr size_t kCudaIpcHandleBytes = CUDA_IPC_HANDLE_SIZE + 8;

// Exports the device allocation starting at `allocation` (`bytes` long) as kCudaIpcHandleBytes
// bytes. `allocation` must be what cudaMalloc returned, not a pointer inside an allocation: the
// handle names the whole allocation and the peer maps its start (a caller with a sub-allocation,
// such as a caching allocator's block, exports the base and passes the offset to CopyTo).
// Errors: InvalidArgument for a null pointer, zero bytes, or memory that is not device memory
// (cudaPointerGetAttributes); CUDA's error from cudaIpcGetMemHandle otherwise.
absl::StatusOr<std::string> ExportCudaIpcHandle(const void* allocation, size_t bytes);

// The host-side checks of a copy out of an opened buffer of `size` bytes: InvalidArgument for a
// null destination, zero bytes, or [offset, offset + bytes) not inside [0, size). CopyTo calls
// it first; exposed so that it is testable without a GPU.
absl::Status CheckIpcCopyArguments(const void* destination, size_t offset, size_t bytes,
                                   size_t size);

// A peer process's allocation, opened in this process (on the current device).
class CudaIpcBuffer {
 public:
  // Opens `handle_bytes` (ExportCudaIpcHandle, from another process) with
  // cudaIpcMemLazyEnablePeerAccess. Errors: InvalidArgument for bytes of the wrong size or a
  // zero size field (checked before any CUDA call); CUDA's error from cudaIpcOpenMemHandle (an
  // invalid handle, the exporting process, a device without IPC support).
  static absl::StatusOr<std::unique_ptr<CudaIpcBuffer>> Open(absl::string_view handle_bytes);

  // Closes the mapping if Close has not run (its error is dropped).
  ~CudaIpcBuffer();
  CudaIpcBuffer(const CudaIpcBuffer&) = delete;
  CudaIpcBuffer& operator=(const CudaIpcBuffer&) = delete;

  // Copies bytes [offset, offset + bytes) of the peer's buffer to `destination` (device memory
  // of this process) on `stream`, then waits, bounded by `deadline`, until everything queued on
  // `stream` so far is done. Errors: CheckIpcCopyArguments; FailedPrecondition after Close;
  // CUDA's error; DeadlineExceeded "CUDA IPC copy of N bytes at offset O: not done by the
  // deadline" (the copy may still be in flight on `stream`: do not free `destination` before
  // synchronizing it).
  absl::Status CopyTo(void* destination, size_t offset, size_t bytes, cudaStream_t stream,
                      absl::Time deadline);

  // Unmaps the peer's buffer (cudaIpcCloseMemHandle). OK if already closed.
  absl::Status Close();

  // The mapped start of the peer's buffer in this process (null after Close), and its size.
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  CudaIpcBuffer(void* data, size_t size) : data_(data), size_(size) {}

  void* data_;  // nullptr once closed
  const size_t size_;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_CUDA_IPC_H_
