// The GPU transports in a build with CUDA and NCCL (see gpu_transports.h). COMPILED ONLY.
#include "weight_sync/gpu_transports.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "weight_sync/cuda_ipc_transport.h"
#include "weight_sync/gpu_device.h"
#include "weight_sync/nccl_transport.h"
#include "weight_sync/transport_choice.h"

namespace lockstep::weight_sync {

bool GpuTransportsBuilt() { return true; }

absl::StatusOr<std::string> WeightDeviceIdentity(const GroupOptions& options) {
  if (options.cuda_device < 0) return std::string(kCpuWeights);
  return CudaDeviceIdentity(
      options.cuda_device,
      absl::StrCat("weight sync: cuda_device=", options.cuda_device,
                   " with transport=", TransportName(options.transport)));
}

absl::StatusOr<std::unique_ptr<BucketTransport>> ConnectGpuTransport(
    Transport kind, const GroupOptions& options, c10d::Store& store, const BucketPlan& plan,
    c10d_compat::CollectiveGroup& control, const std::string& where) {
  if (kind == Transport::kNccl) {
    absl::StatusOr<std::unique_ptr<NcclBucketTransport>> nccl =
        NcclBucketTransport::Connect(options, store, plan, where);
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<BucketTransport>(*std::move(nccl));
  }
  if (kind == Transport::kCudaIpc) {
    absl::StatusOr<std::unique_ptr<CudaIpcBucketTransport>> ipc =
        CudaIpcBucketTransport::Connect(options, store, plan, control, where);
    if (!ipc.ok()) return ipc.status();
    return std::unique_ptr<BucketTransport>(*std::move(ipc));
  }
  return absl::InternalError(
      absl::StrCat(where, ": ", TransportName(kind), " is not a GPU transport"));
}

}  // namespace lockstep::weight_sync
