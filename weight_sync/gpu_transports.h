// The GPU side of a weight-sync group, as the rendezvous (weight_sync/rendezvous.h) sees it:
// where this rank's weights live, and the nccl / cuda_ipc bucket transports.
//
// Two implementations of this one header; CMake compiles exactly one:
//   gpu_transports.cc       LOCKSTEP_HAVE_NCCL (nvcc, the CUDA toolkit and NCCL found at
//                           configure time): NcclBucketTransport (nccl_transport.h) and
//                           CudaIpcBucketTransport (cuda_ipc_transport.h).
//   gpu_transports_stub.cc  otherwise: weights on CUDA are refused with Unimplemented, so a
//                           machine without nvcc still builds and the CPU path is unchanged.
//
// COMPILED ONLY: the CUDA paths have been built but never run on a GPU. On a CPU-only LibTorch
// (Debian's) weights cannot live on CUDA, so cuda_device >= 0 is refused at Join there.
//
// Thread safety: called by the thread that runs Join.
#ifndef LOCKSTEP_WEIGHT_SYNC_GPU_TRANSPORTS_H_
#define LOCKSTEP_WEIGHT_SYNC_GPU_TRANSPORTS_H_

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/group_options.h"

namespace lockstep::weight_sync {

// True iff this build has the GPU transports (gpu_transports.cc, not the stub).
bool GpuTransportsBuilt();

// Where this rank's weights live, as published at Join: kCpuWeights (transport_choice.h) for
// cuda_device -1, else "cuda:<GPU UUID>". Errors for cuda_device >= 0, each naming cuda_device
// and the requested transport: Unimplemented when this build has no GPU transports;
// FailedPrecondition when LibTorch was built without CUDA (weights cannot be on CUDA), when the
// process sees no CUDA device, or when cuda_device is not one of them.
absl::StatusOr<std::string> WeightDeviceIdentity(const GroupOptions& options);

// Forms the chosen GPU transport (`kind`: kNccl or kCudaIpc) for this rank; every rank calls it
// at the same point of Join. `store` is the group's prefixed store (unique id / IPC handle
// exchange), `control` its Gloo group (cuda_ipc's per-bucket hand-over), `where` names the group
// in errors. `plan`, `store` and `control` must outlive the transport. Errors: Unimplemented
// in the stub; DeadlineExceeded when a peer does not finish the set-up within the timeout
// (NCCL's half-formed communicator aborted); FailedPrecondition naming the rank that could not
// open the IPC handle; CUDA's or NCCL's error otherwise.
absl::StatusOr<std::unique_ptr<BucketTransport>> ConnectGpuTransport(
    Transport kind, const GroupOptions& options, c10d::Store& store, const BucketPlan& plan,
    c10d_compat::CollectiveGroup& control, const std::string& where);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_GPU_TRANSPORTS_H_
