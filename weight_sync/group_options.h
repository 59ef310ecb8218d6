// GroupOptions: how a weight-sync group forms (store address, rank, bucket size, transport),
// validated once. Split out of sync_group.h so that the rendezvous and the transports, which
// read it, need not see WeightSyncGroup; sync_group.h includes it, so callers see no change.
//
// Thread safety: plain values and pure functions.
#ifndef LOCKSTEP_WEIGHT_SYNC_GROUP_OPTIONS_H_
#define LOCKSTEP_WEIGHT_SYNC_GROUP_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::weight_sync {

// How bucket bytes travel. kAuto: weights on CUDA on every rank -> cuda_ipc when every rank
// holds them on one physical GPU, else NCCL; weights on the CPU on every rank -> shared memory
// when every rank is on this host, else Gloo (weight_sync/transport_choice.h). kNccl and
// kCudaIpc move device memory and exist only in builds with CUDA and NCCL (LOCKSTEP_HAVE_NCCL);
// elsewhere asking for them fails at Join with Unimplemented naming the transport.
// Numbered as proto/weight_sync.proto's WeightSyncTransport, so a service may static_cast the
// request's value (Validate rejects anything else).
enum class Transport { kAuto = 0, kGloo = 1, kSharedMemory = 2, kNccl = 3, kCudaIpc = 4 };

// True for the transports that move device memory (kNccl, kCudaIpc).
bool IsGpuTransport(Transport transport);

// "auto", "gloo", "shm", "nccl", "cuda_ipc".
const char* TransportName(Transport transport);
// Parses TransportName's output; InvalidArgument naming the value otherwise.
absl::StatusOr<Transport> ParseTransport(const std::string& name);

struct GroupOptions {
  std::string store_host = "127.0.0.1";  // rank 0 hosts the c10d TCPStore here
  int store_port = 0;                    // must be set (> 0): every rank dials it
  int rank = 0;                          // 0 = sender (trainer), 1..world_size-1 = receivers
  int world_size = 1;
  std::string group_name = "sync";           // store key prefix; a new name re-forms the group
  std::chrono::milliseconds timeout{60000};  // the rendezvous and every collective
  int64_t bucket_bytes = int64_t{256} << 20;
  bool verify = false;  // hash every bucket and compare across ranks after each broadcast
  // kSharedMemory with ranks on different hosts: FailedPrecondition at Join naming the hosts.
  Transport transport = Transport::kAuto;
  // The CUDA device this rank's weights live on (Send's parameters, Receive's tensors), or -1:
  // host memory. Every rank of a group must agree on CPU vs CUDA (FailedPrecondition at Join
  // otherwise); nccl / cuda_ipc need >= 0, gloo / shm need -1 (InvalidArgument).
  int cuda_device = -1;

  // InvalidArgument naming the field.
  absl::Status Validate() const;
};

// "weight-sync group '<group_name>' rank <rank>": how every failure of a group names it.
std::string GroupLabel(const GroupOptions& options);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_GROUP_OPTIONS_H_
