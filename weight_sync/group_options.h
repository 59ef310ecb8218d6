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

// How bucket bytes travel. kAuto: shared memory when every rank is on this host, else Gloo.
// Numbered as proto/weight_sync.proto's WeightSyncTransport, so a service may static_cast the
// request's value (Validate rejects anything else).
enum class Transport { kAuto = 0, kGloo = 1, kSharedMemory = 2 };

// "auto", "gloo", "shm".
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

  // InvalidArgument naming the field.
  absl::Status Validate() const;
};

// "weight-sync group '<group_name>' rank <rank>": how every failure of a group names it.
std::string GroupLabel(const GroupOptions& options);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_GROUP_OPTIONS_H_
