// Which transport carries a weight-sync group's buckets. Every rank decides it alike at Join,
// from what every rank published in the store: its HostIdentity() (host name + boot id) and
// where its weights live (WeightDeviceIdentity in weight_sync/gpu_transports.h: "cpu", or
// "cuda:<GPU UUID>", which names one physical GPU whatever CUDA_VISIBLE_DEVICES says).
//
//   weights        requested   hosts / GPUs                    carried by
//   CPU everywhere auto        every rank on rank 0's host     shm (may still fall back to gloo)
//                  auto        another host                    gloo
//                  shm         every rank on rank 0's host     shm
//                  gloo        any                             gloo
//   CUDA everywhere auto       one host, one GPU               cuda_ipc
//                  auto        other GPUs or hosts             nccl
//                  cuda_ipc    one host                        cuda_ipc
//                  nccl        any                             nccl
//
// A pure function of its inputs, so the table is tested without a GPU or a second process.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_WEIGHT_SYNC_TRANSPORT_CHOICE_H_
#define LOCKSTEP_WEIGHT_SYNC_TRANSPORT_CHOICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weight_sync/group_options.h"

namespace lockstep::weight_sync {

// The device identity of weights in host memory.
inline constexpr char kCpuWeights[] = "cpu";

// `hosts[r]` and `devices[r]`: rank r's published identities (options.world_size of each).
// Returns kGloo, kSharedMemory, kNccl or kCudaIpc (never kAuto). Errors, each beginning with
// `where`: FailedPrecondition when ranks disagree on CPU vs CUDA (naming both ranks' devices),
// when shm is asked for across hosts, cuda_ipc across hosts, or a GPU transport for weights in
// host memory (naming the transport and the hosts or devices).
absl::StatusOr<Transport> ChooseTransport(const GroupOptions& options,
                                          const std::vector<std::string>& hosts,
                                          const std::vector<std::string>& devices,
                                          const std::string& where);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_TRANSPORT_CHOICE_H_
