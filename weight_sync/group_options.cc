#include "weight_sync/group_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace lockstep::weight_sync {

const char* TransportName(Transport transport) {
  switch (transport) {
    case Transport::kAuto:
      return "auto";
    case Transport::kGloo:
      return "gloo";
    case Transport::kSharedMemory:
      return "shm";
    case Transport::kNccl:
      return "nccl";
    case Transport::kCudaIpc:
      return "cuda_ipc";
  }
  return "?";
}

bool IsGpuTransport(Transport transport) {
  return transport == Transport::kNccl || transport == Transport::kCudaIpc;
}

absl::StatusOr<Transport> ParseTransport(const std::string& name) {
  for (Transport t : {Transport::kAuto, Transport::kGloo, Transport::kSharedMemory,
                      Transport::kNccl, Transport::kCudaIpc}) {
    if (name == TransportName(t)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "transport must be auto, gloo, shm, nccl or cuda_ipc, got '", name, "'"));
}

absl::Status GroupOptions::Validate() const {
  if (world_size < 1)
    return absl::InvalidArgumentError(absl::StrCat("world_size must be >= 1, got ", world_size));
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", world_size, "), got ", rank));
  }
  if (store_host.empty()) return absl::InvalidArgumentError("store_host must be set");
  if (store_port <= 0 || store_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("store_port must be in [1, 65535], got ", store_port));
  }
  if (group_name.empty() || absl::StrContains(group_name, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_name must be non-empty without '/', got '", group_name, "'"));
  }
  if (timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout must be positive, got ", timeout.count(), " ms"));
  }
  const int transport_number = static_cast<int>(transport);
  if (transport_number < 0 || transport_number > static_cast<int>(Transport::kCudaIpc)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport must be auto (0), gloo (1), shm (2), nccl (3) or cuda_ipc (4), got ",
                     transport_number));
  }
  if (cuda_device < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_device must be -1 (weights on the CPU) or a device index, got ",
                     cuda_device));
  }
  if (IsGpuTransport(transport) && cuda_device < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport=", TransportName(transport),
        " moves weights that live on a CUDA device, but cuda_device is -1 (weights on the CPU); "
        "use transport=auto, gloo or shm"));
  }
  if ((transport == Transport::kGloo || transport == Transport::kSharedMemory) &&
      cuda_device >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport=", TransportName(transport), " moves host memory, but cuda_device is ",
        cuda_device, " (weights on CUDA); use transport=auto, nccl or cuda_ipc"));
  }
  if (bucket_bytes <= 0 || bucket_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_bytes must be a positive multiple of 4, got ", bucket_bytes));
  }
  return absl::OkStatus();
}

std::string GroupLabel(const GroupOptions& options) {
  return absl::StrCat("weight-sync group '", options.group_name, "' rank ", options.rank);
}

}  // namespace lockstep::weight_sync
