// The GPU transports in a build without CUDA/NCCL (see gpu_transports.h): weights on CUDA are
// refused, everything in host memory goes on as before.
#include "absl/strings/str_cat.h"
#include "weight_sync/gpu_transports.h"
#include "weight_sync/transport_choice.h"

namespace lockstep::weight_sync {
namespace {

absl::Status NotBuilt(const GroupOptions& options) {
  return absl::UnimplementedError(absl::StrCat(
      "weight sync: cuda_device=", options.cuda_device, " with transport=",
      TransportName(options.transport),
      ": this build has no GPU transports (nccl, cuda_ipc): nvcc, the CUDA toolkit or NCCL was "
      "not found at configure time"));
}

}  // namespace

bool GpuTransportsBuilt() { return false; }

absl::StatusOr<std::string> WeightDeviceIdentity(const GroupOptions& options) {
  if (options.cuda_device < 0) return std::string(kCpuWeights);
  return NotBuilt(options);
}

absl::StatusOr<std::unique_ptr<BucketTransport>> ConnectGpuTransport(
    Transport kind, const GroupOptions& options, c10d::Store&, const BucketPlan&,
    c10d_compat::CollectiveGroup&, const std::string&) {
  GroupOptions asked = options;
  asked.transport = kind;
  return NotBuilt(asked);
}

}  // namespace lockstep::weight_sync
