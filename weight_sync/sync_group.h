// The weight-sync group: {trainer rank 0, generator ranks 1..N} on one c10d process group. Rank 0
// broadcasts its fp32 parameters bucket by bucket; every other rank receives them into a fresh
// staging TensorMap (cast to its own dtype) that the caller installs.
//
//   // trainer (rank 0)                         // each generator (rank r >= 1)
//   auto group = WeightSyncGroup::Join(          auto group = WeightSyncGroup::Join(
//       {.store_port = p, .rank = 0,                 {.store_host = h, .store_port = p,
//        .world_size = 3}, ManifestOf(params));       .rank = r, .world_size = 3}, manifest);
//   group->Send(params, /*version=*/7);          auto staged = group->Receive(7, torch::kBFloat16);
//
// Buckets: every tensor is laid out as fp32 in one byte stream in manifest (name) order and the
// stream is cut into buckets of `bucket_bytes` (a tensor may span buckets), so both sides derive
// the same plan from the manifest without exchanging per-tensor metadata. Before the buckets rank
// 0 broadcasts a header {version, number of buckets, total bytes}. With `verify`, after the last
// bucket every rank hashes each bucket and the hashes are all-gathered and compared: a mismatch
// is DataLoss on every rank, naming the bucket and the rank.
//
// Failure model: the rendezvous and every collective are bounded by `timeout`. A peer that does
// not show up gives DeadlineExceeded; a peer that dies mid-broadcast gives every survivor
// DeadlineExceeded or Unavailable within the timeout, never a hang. A group that failed is
// broken: later calls return FailedPrecondition at once. Re-form by destroying it and calling
// Join again with a new `group_name` (the same store address may be reused).
//
// Transports (weight_sync/bucket_transport.h; chosen at Join by weight_sync/rendezvous.h): when
// every rank runs on one host (same hostname and boot id, exchanged at Join) and `transport` is
// kAuto or kSharedMemory, the bucket bytes go through a POSIX shared-memory segment
// (weight_sync/shm_transport.h: rank 0 copies each bucket into one of two slots, every receiver
// copies it out, ~2 memcpys per byte) and only the header and the verification hashes use Gloo.
// Otherwise (other hosts, kGloo, or a /dev/shm the ranks do not share under kAuto) the buckets
// are Gloo broadcasts (weight_sync/gloo_transport.h). The failure model is the same for both.
//
// Weights on CUDA (`cuda_device` >= 0 on every rank): the buckets go device to device, through
// CUDA IPC when every rank holds them on one GPU (weight_sync/cuda_ipc_transport.h), else NCCL
// broadcasts (weight_sync/nccl_transport.h); the header and hashes stay on Gloo. Both exist only
// in builds where nvcc and NCCL were found, need a LibTorch with CUDA at run time (Join refuses
// cuda_device >= 0 otherwise, naming it), and are COMPILED ONLY: never run on a GPU yet.
//
// Thread safety: a WeightSyncGroup is used by one thread at a time (calls are collectives: every
// rank must make the matching call in the same order). Distinct groups are independent.
#ifndef LOCKSTEP_WEIGHT_SYNC_SYNC_GROUP_H_
#define LOCKSTEP_WEIGHT_SYNC_SYNC_GROUP_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/safetensors.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/group_options.h"
#include "weight_sync/manifest.h"

namespace lockstep::weight_sync {

struct Connection;  // weight_sync/rendezvous.h

class WeightSyncGroup {
 public:
  // Rendezvous: rank 0 hosts the TCPStore at store_host:store_port; every rank publishes its
  // manifest (and its bucket_bytes and verify settings) under `group_name` and checks every
  // other rank's against rank 0's; then a Gloo process group forms. Errors: InvalidArgument (bad
  // options); FailedPrecondition naming the first differing tensor (its name and both shapes, or
  // which rank lacks it), or the differing settings (incl. the requested transport), on every
  // rank, or naming the hosts when kSharedMemory was asked for across hosts (or a receiver
  // cannot map rank 0's segment);
  // DeadlineExceeded when a peer does not show up within the timeout; Unavailable when the store
  // cannot be hosted or reached.
  static absl::StatusOr<std::unique_ptr<WeightSyncGroup>> Join(const GroupOptions& options,
                                                               const Manifest& manifest);

  // Never blocks longer than the timeout: a broken group's process group is abandoned (its
  // blocked worker threads time out on their own) rather than joined.
  ~WeightSyncGroup();

  WeightSyncGroup(const WeightSyncGroup&) = delete;
  WeightSyncGroup& operator=(const WeightSyncGroup&) = delete;

  // Rank 0 only: broadcasts `params` (any floating dtype, sent as fp32) as `version`. `params`
  // must match the manifest and live on the group's device (the CPU, or cuda:cuda_device):
  // InvalidArgument naming the tensor otherwise, before anything is sent. Returns after the last bucket (and the verification) completed on this rank; on
  // shared memory, once every receiver has copied the last bucket out.
  absl::Status Send(const TensorMap& params, int64_t version);

  // Ranks >= 1: receives the next broadcast into tensors of `dtype` on this rank's device (the CPU,
  // or cuda:cuda_device), one per manifest entry
  // (a staging copy the caller owns; nothing else writes them while the caller holds any of
  // them). fp32 tensors are views of one staging buffer that the group recycles for a later
  // Receive once the caller has dropped every view of it: faulting in fresh memory, not the
  // wire, is what made syncs slow (a generator keeps at most two: the weights it runs and the
  // next ones). FailedPrecondition if the announced version is not `expected_version` (the
  // broadcast is still consumed, so the group stays usable).
  absl::StatusOr<TensorMap> Receive(int64_t expected_version, torch::Dtype dtype);

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const Manifest& manifest() const { return plan_.manifest(); }
  int64_t num_buckets() const { return plan_.num_buckets(); }
  int64_t total_bytes() const { return plan_.total_bytes(); }
  // The transport the buckets use: kGloo, kSharedMemory, kNccl or kCudaIpc (never kAuto).
  Transport transport() const;
  // True once a collective failed; the group must then be re-formed.
  bool broken() const { return broken_; }

  // The fp32 staging buffers this group keeps for Receive, for the group that replaces it
  // (AdoptStagingBuffers): a re-formed group would otherwise fault in fresh memory for its first
  // two syncs, the weights the caller runs on being one of them.
  std::vector<torch::Tensor> TakeStagingBuffers() { return std::exchange(staging_buffers_, {}); }
  // Keeps `buffers` for Receive to reuse (once nothing else holds them); those that are not one
  // fp32 stream of this group's size on this rank's device are dropped, and at most two are kept.
  void AdoptStagingBuffers(std::vector<torch::Tensor> buffers);
  // Wall time of the last successful Send/Receive (header, buckets and verification), seconds.
  double last_seconds() const { return last_seconds_; }

 private:
  WeightSyncGroup(GroupOptions options, BucketPlan plan);

  // FailedPrecondition if the group is broken or this rank is on the wrong side of `operation`.
  absl::Status CheckUsable(const char* operation, bool sender) const;
  // All-gathers this rank's bucket hashes and compares every rank's with rank 0's.
  absl::Status VerifyHashes(const std::vector<int64_t>& hashes);
  // Marks the group broken, aborts the transport (so peers fail at once), returns `status`.
  absl::Status Fail(absl::Status status);
  // A whole-stream fp32 buffer for Receive: a kept one nobody else holds, else a new one.
  torch::Tensor StagingBuffer();

  const GroupOptions options_;
  const BucketPlan plan_;
  // The store, the Gloo control group and the bucket transport (weight_sync/rendezvous.h).
  std::unique_ptr<Connection> connection_;
  // fp32 staging buffers handed out by Receive (at most two kept), reused when only we hold them.
  std::vector<torch::Tensor> staging_buffers_;
  bool broken_ = false;
  double last_seconds_ = 0;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_SYNC_GROUP_H_
