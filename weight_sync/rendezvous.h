// The rendezvous of a weight-sync group (the work of WeightSyncGroup::Join):
//   1. the store: rank 0 hosts a c10d TCPStore at store_host:store_port, every rank dials it;
//   2. every rank publishes its manifest, its settings (bucket_bytes, verify, transport), its
//      HostIdentity() and where its weights live (WeightDeviceIdentity, gpu_transports.h) under
//      the group's name and compares every rank's with rank 0's, so that all ranks refuse a
//      mismatch with the same message;
//   3. the control process group (Gloo) forms: it carries the version header and the hashes;
//   4. the transport (ChooseTransport, weight_sync/transport_choice.h): weights in host memory ->
//      shared memory when every rank is on rank 0's host and transport is auto or shm
//      (weight_sync/shm_transport.h, which may still fall back to Gloo under auto), else Gloo
//      broadcasts on the control group (weight_sync/gloo_transport.h); weights on CUDA -> cuda_ipc
//      or nccl (weight_sync/gpu_transports.h; only in builds with CUDA and NCCL).
// Every wait is bounded by the group's timeout.
//
// Thread safety: Rendezvous is a blocking call from one thread; the store helpers are as
// thread-safe as c10d's stores.
#ifndef LOCKSTEP_WEIGHT_SYNC_RENDEZVOUS_H_
#define LOCKSTEP_WEIGHT_SYNC_RENDEZVOUS_H_

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/group_options.h"

namespace lockstep::weight_sync {

// What a formed group holds. Destroy `transport` before `control` (member order does).
struct Connection {
  c10::intrusive_ptr<c10d::Store> store;                  // keys prefixed with the group name
  std::unique_ptr<c10d_compat::CollectiveGroup> control;  // header, hashes, Gloo buckets
  std::unique_ptr<BucketTransport> transport;             // may refer to `control`
};

// Steps 1-4 above for this rank. `plan` (derived from this rank's manifest) must outlive the
// connection. Errors, on every rank alike where the cause is shared: FailedPrecondition naming
// the first differing tensor (its name and both shapes, or which rank lacks it), or the
// differing settings, or the hosts when transport=shm spans hosts (or a receiver cannot map rank
// 0's segment), or the devices when ranks disagree on CPU vs CUDA; Unimplemented /
// FailedPrecondition naming cuda_device when this build or process cannot hold weights on CUDA
// (gpu_transports.h); DeadlineExceeded naming the ranks that did not show up within the timeout;
// Unavailable when the store cannot be hosted or fails; DataLoss for an unreadable manifest.
absl::StatusOr<Connection> Rendezvous(const GroupOptions& options, const BucketPlan& plan);

// Store helpers (strings as the store's bytes); they throw c10::Error as the store does.
void SetText(c10d::Store& store, const std::string& key, const std::string& value);
std::string GetText(c10d::Store& store, const std::string& key);
// Waits until key_of(r) is set for every rank r in [first_rank, world_size): OK, or after the
// group's timeout DeadlineExceeded "<where>: not every rank <what> within <timeout> ms (a peer
// left during the rendezvous)".
absl::Status WaitForRanks(c10d::Store& store, std::string (*key_of)(int rank), int first_rank,
                          const GroupOptions& options, const std::string& where,
                          const std::string& what);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_RENDEZVOUS_H_
