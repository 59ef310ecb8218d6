#include "weight_sync/transport_choice.h"

#include "absl/strings/str_cat.h"

namespace lockstep::weight_sync {
namespace {

// The host name part of HostIdentity() (host name, newline, boot id).
std::string HostName(const std::string& identity) {
  return identity.substr(0, identity.find('\n'));
}

// The first rank whose host differs from rank 0's, or -1.
int FirstOtherHost(const std::vector<std::string>& hosts) {
  for (size_t r = 1; r < hosts.size(); ++r) {
    if (hosts[r] != hosts[0]) return static_cast<int>(r);
  }
  return -1;
}

absl::StatusOr<Transport> ChooseHostTransport(const GroupOptions& options,
                                              const std::vector<std::string>& hosts,
                                              const std::string& where) {
  if (IsGpuTransport(options.transport)) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": transport=", TransportName(options.transport),
                     " moves weights on CUDA, but every rank's weights are in host memory"));
  }
  if (options.transport == Transport::kGloo || options.world_size == 1) return Transport::kGloo;
  const int other = FirstOtherHost(hosts);
  if (other < 0) return Transport::kSharedMemory;
  if (options.transport == Transport::kSharedMemory) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": transport=shm needs every rank on one host, but rank 0 is on '",
                     HostName(hosts[0]), "' and rank ", other, " on '", HostName(hosts[other]),
                     "' (or another boot); use transport=auto or gloo"));
  }
  return Transport::kGloo;
}

absl::StatusOr<Transport> ChooseDeviceTransport(const GroupOptions& options,
                                                const std::vector<std::string>& hosts,
                                                const std::vector<std::string>& devices,
                                                const std::string& where) {
  if (options.transport == Transport::kGloo || options.transport == Transport::kSharedMemory) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": transport=", TransportName(options.transport),
                     " moves host memory, but every rank's weights are on CUDA"));
  }
  if (options.transport == Transport::kNccl) return Transport::kNccl;
  const int other_host = FirstOtherHost(hosts);
  if (options.transport == Transport::kCudaIpc) {
    if (other_host < 0) return Transport::kCudaIpc;
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": transport=cuda_ipc needs every rank on one host, but rank 0 is on '",
        HostName(hosts[0]), "' and rank ", other_host, " on '", HostName(hosts[other_host]),
        "'; use transport=auto or nccl"));
  }
  // auto: one physical GPU on one host shares memory; anything else is NCCL's.
  if (other_host >= 0) return Transport::kNccl;
  for (size_t r = 1; r < devices.size(); ++r) {
    if (devices[r] != devices[0]) return Transport::kNccl;
  }
  return Transport::kCudaIpc;
}

}  // namespace

absl::StatusOr<Transport> ChooseTransport(const GroupOptions& options,
                                          const std::vector<std::string>& hosts,
                                          const std::vector<std::string>& devices,
                                          const std::string& where) {
  const size_t world_size = static_cast<size_t>(options.world_size);
  if (hosts.size() != world_size || devices.size() != world_size) {
    return absl::InternalError(absl::StrCat(where, ": ", hosts.size(), " hosts and ",
                                            devices.size(), " devices for ", world_size, " ranks"));
  }
  const bool on_cuda = devices[0] != kCpuWeights;
  for (size_t r = 1; r < world_size; ++r) {
    if ((devices[r] != kCpuWeights) != on_cuda) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": rank 0's weights are on ", devices[0], " but rank ", r, "'s on ", devices[r],
          "; every rank of a group keeps its weights on CUDA (cuda_device >= 0) or every rank in "
          "host memory (cuda_device = -1)"));
    }
  }
  if (on_cuda) return ChooseDeviceTransport(options, hosts, devices, where);
  return ChooseHostTransport(options, hosts, where);
}

}  // namespace lockstep::weight_sync
