// The project's one c10d compatibility file: the only place that constructs c10d objects
// (TCPStore, PrefixStore, ProcessGroupGloo), so that LibTorch version differences stay in one
// small file. Debian's LibTorch 1.13 has ProcessGroupGloo derive from ProcessGroup; LibTorch 2.x
// moved it under c10d::Backend and grew TCPStoreOptions. Callers see only c10d::Store,
// c10d::Work and CollectiveGroup. Used by the weight-sync group (weight_sync/sync_group.h) and
// by data-parallel training (trainer/data_parallel.h); it lives here, in the library
// lockstep_c10d, because trainer/ may depend on weight_sync/ but not the other way round.
//
// NCCL: the weight sync does not use c10d's ProcessGroupNCCL; its nccl transport talks to NCCL
// directly (weight_sync/nccl_transport.h, built wherever NCCL is found).
//
// Errors: the constructors and the Start* calls throw c10::Error (c10d reports failures that
// way); Wait, AllReduce and Broadcast return them as absl::Status (StatusFromException).
// Thread safety: a CollectiveGroup may be used from one thread at a time (collectives must be
// issued in the same order on every rank anyway); the stores are thread-safe (c10d's locking).
#ifndef LOCKSTEP_WEIGHT_SYNC_C10D_COMPAT_H_
#define LOCKSTEP_WEIGHT_SYNC_C10D_COMPAT_H_

#include <torch/torch.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "absl/status/status.h"

namespace lockstep::c10d_compat {

// Rank 0 (`is_server`) hosts a TCPStore on host:port (several stores in one process may share a
// port: re-forming a group reuses the server); other ranks connect, retrying until `timeout`.
// Does not wait for the other ranks. Store operations time out after `timeout`.
c10::intrusive_ptr<c10d::Store> ConnectTcpStore(const std::string& host, int port, bool is_server,
                                                std::chrono::milliseconds timeout);

// A view of `store` whose keys are prefixed with `prefix` + "/".
c10::intrusive_ptr<c10d::Store> PrefixedStore(const std::string& prefix,
                                              c10::intrusive_ptr<c10d::Store> store);

// The text of a c10d or Gloo failure (c10::Error, gloo::IoException, ...) without LibTorch's
// C++ backtrace.
std::string ErrorText(const std::exception& error);

// A failed c10d call as a status: DeadlineExceeded when its text says it timed out (the one case
// callers act on differently), Unavailable otherwise. Message: "<what>: <ErrorText>".
absl::Status StatusFromException(const std::exception& error, const std::string& what);

enum class ReduceKind { kSum, kMin, kMax };

// A c10d process group over CPU tensors (Gloo). The Start* operations are asynchronous: they
// return a Work for Wait.
class CollectiveGroup {
 public:
  // Rendezvous through `store` (blocks until every rank constructed its group; throws after
  // `timeout`). Gloo's transport binds to the interface named by GLOO_SOCKET_IFNAME when that is
  // set (as PyTorch does), else to `store_host` when it is a loopback address or this rank hosts
  // the store (rank 0), else to this machine's host name. Every operation is bounded by
  // `timeout` inside Gloo.
  CollectiveGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                  const std::string& store_host, std::chrono::milliseconds timeout);
  // Joins Gloo's worker threads (each blocks at most `timeout` in an operation), unless
  // Abandon() was called.
  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;

  // In place; `root`'s `tensor` reaches every rank. `tensor` must be dense and contiguous.
  c10::intrusive_ptr<c10d::Work> StartBroadcast(torch::Tensor& tensor, int root = 0);
  // In place, element-wise across ranks: afterwards every rank holds the same bits.
  c10::intrusive_ptr<c10d::Work> StartAllReduce(torch::Tensor& tensor, ReduceKind kind);
  // outputs[r] receives rank r's `input`.
  c10::intrusive_ptr<c10d::Work> StartAllGather(std::vector<torch::Tensor>& outputs,
                                                torch::Tensor& input);

  // Waits for `work` within the timeout; a failure as StatusFromException(error, what).
  absl::Status Wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) const;

  // Blocking StartAllReduce / StartBroadcast + Wait, a failure to start included: InvalidArgument
  // for an undefined, sparse or non-contiguous tensor or a root out of range; DeadlineExceeded /
  // Unavailable naming the operation and this rank otherwise.
  absl::Status AllReduce(torch::Tensor& tensor, ReduceKind kind);
  absl::Status Broadcast(torch::Tensor& tensor, int root);

  // Gives up the process group without joining its threads: for a broken group whose workers may
  // still sit in a failed collective. The group's memory is leaked on purpose.
  void Abandon();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  struct Impl;
  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::c10d_compat

#endif  // LOCKSTEP_WEIGHT_SYNC_C10D_COMPAT_H_
