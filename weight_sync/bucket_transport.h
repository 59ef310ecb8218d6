// BucketTransport: how the bucket bytes of one broadcast travel from rank 0 to every receiver.
// WeightSyncGroup (weight_sync/sync_group.h) owns the protocol around it: it broadcasts the
// version header before the buckets and exchanges the verification hashes after them, both on
// the Gloo control group that every group has (small CPU tensors); a transport moves only the
// buckets of the plan, in plan order, and says when a peer failed.
//
//   rank 0:     BucketSource source(plan, flat, verify);  transport->SendBuckets(source);
//   receivers:  BucketSink sink(plan, dtype, staging, verify);  transport->ReceiveBuckets(sink);
//               TensorMap received = sink.Finish();
//
// The transports (chosen at Join by weight_sync/rendezvous.h, see transport_choice.h):
//   GlooBucketTransport     (gloo_transport.h)      Gloo broadcasts; the path between hosts.
//   ShmBucketTransport      (shm_transport.h)       a shared-memory segment; every rank on one host.
//   NcclBucketTransport     (nccl_transport.h)      NCCL broadcasts of device memory; weights on
//                                                   CUDA on other GPUs or hosts.
//   CudaIpcBucketTransport  (cuda_ipc_transport.h)  CUDA IPC slots; weights on one GPU.
// The two GPU ones exist only in builds with CUDA and NCCL (gpu_transports.h) and are compiled
// only: never run on a GPU. They pack and take with the same BucketSource / BucketSink (which
// copy with LibTorch, so device tensors work; only host fp32 takes the memcpy path). The header
// and the hashes stay on Gloo for every transport.
//
// Thread safety: a transport, a source and a sink are used by the one thread that runs the
// group's Send or Receive.
#ifndef LOCKSTEP_WEIGHT_SYNC_BUCKET_TRANSPORT_H_
#define LOCKSTEP_WEIGHT_SYNC_BUCKET_TRANSPORT_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/safetensors.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/group_options.h"

namespace lockstep::weight_sync {

// Rank 0's side of a broadcast: the parameters, packed into bucket memory on request.
class BucketSource {
 public:
  // `flat`: per manifest entry, the parameter flattened to 1-D (any floating dtype). With
  // `verify`, every packed bucket is hashed.
  BucketSource(const BucketPlan& plan, std::vector<torch::Tensor> flat, bool verify);

  // Writes elements [begin, end) of bucket `k`, as fp32, to bucket[begin, end) (`bucket`: fp32,
  // 1-D, at least `end` elements). Once `end` is the bucket's length, hashes bucket[0, end) (so
  // pack a bucket's pieces in order, and all of them into the same memory).
  void Pack(int64_t k, const torch::Tensor& bucket, int64_t begin, int64_t end);

  // BucketHash of each packed bucket, in order (empty without verify).
  const std::vector<int64_t>& hashes() const { return hashes_; }

 private:
  const BucketPlan& plan_;
  const std::vector<torch::Tensor> flat_;
  const bool verify_;
  std::vector<int64_t> hashes_;
};

// A receiver's side of a broadcast: where the bucket bytes go. fp32: one staging buffer holding
// the whole stream, which the returned tensors view; another dtype: one tensor per manifest
// entry, each piece cast as it arrives.
class BucketSink {
 public:
  // `staging`: for kFloat32, an fp32 buffer of plan.num_elements() on `device` (ignored
  // otherwise). Another dtype's tensors are allocated on `device`. With `verify`, every bucket is
  // hashed: fp32, what this rank then holds; otherwise the fp32 bytes received.
  BucketSink(const BucketPlan& plan, torch::Dtype dtype, torch::Tensor staging, bool verify,
             torch::Device device = torch::kCPU);

  // fp32: the staging slice of bucket `k`, which a transport may receive into directly (Take
  // then copies nothing). Undefined for other dtypes.
  torch::Tensor DirectSlice(int64_t k) const;

  // Elements [begin, end) of bucket `k` are in bucket[begin, end) (fp32, 1-D): copies (or casts)
  // them into place. Once `end` is the bucket's length, hashes the bucket; call it before the
  // memory behind `bucket` is reused.
  void Take(int64_t k, const torch::Tensor& bucket, int64_t begin, int64_t end);

  // Every bucket taken: the tensors by name (fp32: views of the staging buffer).
  TensorMap Finish();

  const std::vector<int64_t>& hashes() const { return hashes_; }

 private:
  const BucketPlan& plan_;
  const torch::Dtype dtype_;
  const torch::Tensor staging_;         // fp32 only
  std::vector<torch::Tensor> outputs_;  // other dtypes: one per manifest entry
  const bool verify_;
  std::vector<int64_t> hashes_;
};

class BucketTransport {
 public:
  virtual ~BucketTransport() = default;

  // kGloo, kSharedMemory, kNccl or kCudaIpc (never kAuto).
  virtual Transport kind() const = 0;

  // Rank 0: every bucket of the plan, packed from `source`. Returns once this rank's part is
  // done (shared memory: once every receiver has taken the last piece out). Errors name the
  // group and the bucket: DeadlineExceeded when a peer made no progress within the timeout,
  // Unavailable when one left or aborted.
  virtual absl::Status SendBuckets(BucketSource& source) = 0;

  // Ranks >= 1: every bucket of the plan, into `sink`. Errors as for SendBuckets.
  virtual absl::Status ReceiveBuckets(BucketSink& sink) = 0;

  // After a failure on this rank: makes the peers' pending and later waits fail at once where
  // the transport can (shared memory); a no-op where the peers find out by themselves (Gloo).
  virtual void Abort() = 0;
};

// "<GroupLabel>: <what> failed", how every failed step of a broadcast begins.
std::string FailurePrefix(const GroupOptions& options, const std::string& what);

// A failed transfer step as the group reports it: "<GroupLabel>: <what> failed: <cause>", with
// the cause's code; a DeadlineExceeded cause adds " (no progress within <timeout> ms)".
absl::Status TransferFailure(const GroupOptions& options, const std::string& what,
                             const absl::Status& cause);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_BUCKET_TRANSPORT_H_
