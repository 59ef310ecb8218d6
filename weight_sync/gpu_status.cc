#include "weight_sync/gpu_status.h"

#include <algorithm>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::weight_sync {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clear the slot; a sticky error stays sticky whatever we do
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
    case cudaErrorMapBufferObjectFailed:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status WaitForStream(cudaStream_t stream, absl::Time deadline, absl::string_view what,
                           const std::function<absl::Status()>& check) {
  // A short transfer finishes within a few yields; a long one is polled every millisecond.
  absl::Duration pause = absl::ZeroDuration();
  while (true) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return absl::OkStatus();
    if (state != cudaErrorNotReady) return CudaStatus(state, what);
    if (check) {
      absl::Status checked = check();
      if (!checked.ok()) return checked;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": not done by the deadline"));
    }
    if (pause == absl::ZeroDuration()) {
      std::this_thread::yield();
      pause = absl::Microseconds(20);
    } else {
      absl::SleepFor(std::min(pause, deadline - now));
      pause = std::min(pause * 2, absl::Milliseconds(1));
    }
  }
}

}  // namespace lockstep::weight_sync
