// The only place that constructs c10d objects (TCPStore, PrefixStore, ProcessGroupGloo), so that
// LibTorch version differences stay in one small file: Debian's LibTorch 1.13 has
// ProcessGroupGloo derive from ProcessGroup; LibTorch 2.x moved it under c10d::Backend and grew
// TCPStoreOptions. Callers see only c10d::Store, c10d::Work and this wrapper.
//
// NCCL: a CUDA LibTorch built with NCCL (USE_C10D_NCCL) would add a ProcessGroupNCCL here for CUDA
// tensors. Debian's LibTorch is CPU-only and ships no NCCL, so that backend is not built and
// NcclAvailable() is false; WeightSyncGroup then refuses CUDA tensors with Unimplemented.
//
// Every function here may throw c10::Error (c10d reports failures that way); weight_sync/
// sync_group.cc catches and converts them. Thread safety: a CollectiveGroup may be used from one
// thread at a time; the stores are thread-safe (c10d's own locking).
#ifndef LOCKSTEP_WEIGHT_SYNC_C10D_COMPAT_H_
#define LOCKSTEP_WEIGHT_SYNC_C10D_COMPAT_H_

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace lockstep::weight_sync::compat {

// Rank 0 (`is_server`) hosts a TCPStore on host:port (several stores in one process may share a
// port: re-forming a group reuses the server); other ranks connect, retrying until `timeout`.
// Does not wait for the other ranks. Store operations time out after `timeout`.
c10::intrusive_ptr<c10d::Store> ConnectTcpStore(const std::string& host, int port, bool is_server,
                                                std::chrono::milliseconds timeout);

// A view of `store` whose keys are prefixed with `prefix` + "/".
c10::intrusive_ptr<c10d::Store> PrefixedStore(const std::string& prefix,
                                              c10::intrusive_ptr<c10d::Store> store);

// True iff this build can serve CUDA tensors (LibTorch with CUDA and NCCL). False here.
bool NcclAvailable();

// A c10d process group over CPU tensors (Gloo). Operations are asynchronous: they return a Work
// whose wait(timeout) throws on failure or timeout.
class CollectiveGroup {
 public:
  // Rendezvous through `store` (blocks until every rank constructed its group, or throws after
  // `timeout`). Gloo's transport binds to `device_host` (an address of this machine reachable by
  // the peers). Every operation is also bounded by `timeout` inside Gloo.
  CollectiveGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                  const std::string& device_host, std::chrono::milliseconds timeout);
  // Joins Gloo's worker threads (each blocks at most `timeout` in an operation), unless
  // Abandon() was called.
  ~CollectiveGroup();

  // In place; rank 0's `tensor` reaches every rank. `tensor` must be contiguous.
  c10::intrusive_ptr<c10d::Work> Broadcast(torch::Tensor& tensor);
  // outputs[r] receives rank r's `input`.
  c10::intrusive_ptr<c10d::Work> AllGather(std::vector<torch::Tensor>& outputs,
                                           torch::Tensor& input);

  // Gives up the process group without joining its threads: for a broken group whose workers may
  // still sit in a failed collective. The group's memory is leaked on purpose.
  void Abandon();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::weight_sync::compat

#endif  // LOCKSTEP_WEIGHT_SYNC_C10D_COMPAT_H_
