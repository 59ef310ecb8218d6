#include "weight_sync/nccl_broadcast.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weight_sync/gpu_status.h"

namespace lockstep::weight_sync {
namespace {

// An NCCL result as a status: "<what>: <ncclGetErrorString>[: <ncclGetLastError>]", with a code
// by kind. `comm` may be null (no last-error text then).
absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", ncclGetErrorString(result));
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') absl::StrAppend(&message, ": ", detail);
  // ncclUnhandledCudaError, ncclInternalError and anything newer: Internal.
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (result == ncclInvalidArgument) {
    code = absl::StatusCode::kInvalidArgument;
  } else if (result == ncclInvalidUsage) {
    code = absl::StatusCode::kFailedPrecondition;
  } else if (result == ncclSystemError || result == ncclRemoteError) {
    code = absl::StatusCode::kUnavailable;  // a peer or the network: worth a new group
  }
  return absl::Status(code, message);
}

}  // namespace

absl::StatusOr<std::string> NcclUniqueIdBytes() {
  ncclUniqueId id;
  absl::Status status = NcclStatus(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
  if (!status.ok()) return status;
  return std::string(id.internal, sizeof(id.internal));
}

absl::Status CheckBroadcastArguments(const void* device_buffer, size_t bytes, int root,
                                     int world_size) {
  if (device_buffer == nullptr) {
    return absl::InvalidArgumentError("NCCL broadcast: null device buffer");
  }
  if (bytes == 0) return absl::InvalidArgumentError("NCCL broadcast: zero bytes");
  if (root < 0 || root >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL broadcast: root ", root, " outside [0, ", world_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    absl::string_view id_bytes, int rank, int world_size, absl::Time deadline) {
  if (id_bytes.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL init: unique id of ", id_bytes.size(),
                                                   " bytes, expected ", kNcclUniqueIdBytes));
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL init: rank ", rank, " of world size ", world_size));
  }
  int device = -1;
  absl::Status status = CudaStatus(cudaGetDevice(&device), "NCCL init: cudaGetDevice");
  if (!status.ok()) return status;

  ncclUniqueId id;
  std::memcpy(id.internal, id_bytes.data(), kNcclUniqueIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we poll, bounded by the deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
  // The object exists from here on (also when `started` is an error, if NCCL got that far), so
  // every failure below aborts it.
  std::unique_ptr<NcclCommunicator> communicator(
      new NcclCommunicator(comm, rank, world_size, device));
  const std::string operation = "NCCL init";
  if (started != ncclSuccess && started != ncclInProgress) {
    status = NcclStatus(started, comm, communicator->Describe(operation));
    communicator->Abort();
    return status;
  }
  if (comm == nullptr) {
    return absl::InternalError(
        absl::StrCat(communicator->Describe(operation), ": NCCL returned no communicator"));
  }
  status = communicator->WaitUntilReady(operation, deadline);
  if (!status.ok()) {
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(absl::StrCat(status.message(), " (not every one of the ",
                                                      world_size, " ranks joined with this id)"));
    }
    return status;
  }
  return communicator;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int world_size, int device)
    : comm_(comm), rank_(rank), world_size_(world_size), device_(device) {}

NcclCommunicator::~NcclCommunicator() { Abort(); }

void NcclCommunicator::Abort() {
  if (comm_ == nullptr) return;
  // Frees the communicator whatever it returns; nothing more can be done with it either way.
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

std::string NcclCommunicator::Describe(absl::string_view operation) const {
  return absl::StrCat(operation, " (rank ", rank_, " of ", world_size_, ", device ", device_, ")");
}

absl::Status NcclCommunicator::AsyncError(absl::string_view operation) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
  if (queried != ncclSuccess) return NcclStatus(queried, comm_, Describe(operation));
  if (state == ncclInProgress) return absl::OkStatus();
  return NcclStatus(state, comm_, Describe(operation));
}

absl::Status NcclCommunicator::WaitUntilReady(absl::string_view operation, absl::Time deadline) {
  absl::Duration pause = absl::Microseconds(20);
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
    if (queried == ncclSuccess && state == ncclSuccess) return absl::OkStatus();
    if (queried != ncclSuccess || state != ncclInProgress) {
      absl::Status status =
          NcclStatus(queried != ncclSuccess ? queried : state, comm_, Describe(operation));
      Abort();
      return absl::Status(status.code(), absl::StrCat(status.message(), "; communicator aborted"));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      Abort();
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(operation), ": not done by the deadline; communicator aborted"));
    }
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(pause * 2, absl::Milliseconds(1));
  }
}

absl::Status NcclCommunicator::Broadcast(void* device_buffer, size_t bytes, int root,
                                         cudaStream_t stream, absl::Time deadline) {
  const std::string operation =
      absl::StrCat("NCCL broadcast of ", bytes, " bytes from root ", root);
  // An aborted or closed communicator refuses every call, whatever its arguments.
  if (comm_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(operation), ": the communicator was aborted or closed"));
  }
  absl::Status status = CheckBroadcastArguments(device_buffer, bytes, root, world_size_);
  if (!status.ok()) return status;
  int current = -1;
  status = CudaStatus(cudaGetDevice(&current), Describe(operation) + ": cudaGetDevice");
  if (!status.ok()) return status;
  if (current != device_) {
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(operation), ": device ", current, " is current, the communicator's is ", device_));
  }

  const ncclResult_t enqueued =
      ncclBroadcast(device_buffer, device_buffer, bytes, ncclUint8, root, comm_, stream);
  if (enqueued != ncclSuccess && enqueued != ncclInProgress) {
    status = NcclStatus(enqueued, comm_, Describe(operation));
    Abort();
    return absl::Status(status.code(), absl::StrCat(status.message(), "; communicator aborted"));
  }
  status = WaitUntilReady(operation, deadline);  // the enqueue itself (nonblocking mode)
  if (!status.ok()) return status;

  status = WaitForStream(stream, deadline, Describe(operation),
                         [this, &operation] { return AsyncError(operation); });
  if (!status.ok()) {
    Abort();
    return absl::Status(status.code(), absl::StrCat(status.message(), "; communicator aborted"));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Close(absl::Time deadline) {
  if (comm_ == nullptr) return absl::OkStatus();
  const std::string operation = "NCCL close";
  const ncclResult_t finalizing = ncclCommFinalize(comm_);
  if (finalizing != ncclSuccess && finalizing != ncclInProgress) {
    absl::Status status = NcclStatus(finalizing, comm_, Describe(operation));
    Abort();
    return status;
  }
  absl::Status status = WaitUntilReady(operation, deadline);
  if (!status.ok()) return status;
  const ncclResult_t destroyed = ncclCommDestroy(comm_);
  comm_ = nullptr;  // freed by ncclCommDestroy even when it reports an error
  return NcclStatus(destroyed, nullptr, Describe(operation));
}

}  // namespace lockstep::weight_sync
