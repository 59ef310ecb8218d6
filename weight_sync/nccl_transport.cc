#include "weight_sync/nccl_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weight_sync/gpu_device.h"
#include "weight_sync/rendezvous.h"

namespace lockstep::weight_sync {
namespace {

constexpr char kNcclIdKey[] = "nccl/id";

absl::Time DeadlineAfter(const GroupOptions& options) {
  return absl::Now() + absl::FromChrono(options.timeout);
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclBucketTransport>> NcclBucketTransport::Connect(
    const GroupOptions& options, c10d::Store& store, const BucketPlan& plan,
    const std::string& where) {
  CudaDeviceScope device(options.cuda_device);
  if (!device.status().ok()) {
    return absl::Status(device.status().code(),
                        absl::StrCat(where, ": NCCL set-up: ", device.status().message()));
  }
  std::string id;
  try {
    if (options.rank == 0) {
      absl::StatusOr<std::string> drawn = NcclUniqueIdBytes();
      if (!drawn.ok()) {
        return absl::Status(drawn.status().code(),
                            absl::StrCat(where, ": NCCL set-up: ", drawn.status().message()));
      }
      id = *std::move(drawn);
      SetText(store, kNcclIdKey, id);
    } else {
      try {
        store.wait({kNcclIdKey}, options.timeout);
      } catch (const std::exception&) {
        return absl::DeadlineExceededError(absl::StrCat(
            where, ": rank 0 published no NCCL unique id within ", options.timeout.count(), " ms"));
      }
      id = GetText(store, kNcclIdKey);
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(where, ": NCCL set-up: store failed: ", c10d_compat::ErrorText(e)));
  }
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> communicator = NcclCommunicator::Create(
      id, options.rank, options.world_size, DeadlineAfter(options));
  if (!communicator.ok()) {
    return absl::Status(communicator.status().code(),
                        absl::StrCat(where, ": ", communicator.status().message()));
  }
  return std::unique_ptr<NcclBucketTransport>(
      new NcclBucketTransport(options, plan, *std::move(communicator)));
}

NcclBucketTransport::NcclBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                                         std::unique_ptr<NcclCommunicator> communicator)
    : options_(options), plan_(plan), communicator_(std::move(communicator)) {}

torch::Tensor NcclBucketTransport::BucketBuffer(int64_t num_elements) {
  if (!bucket_buffer_.defined()) {
    const int64_t capacity = std::min(plan_.bucket_elements(), plan_.num_elements());
    bucket_buffer_ = DeviceFloats(capacity, options_.cuda_device);
  }
  return bucket_buffer_.narrow(0, 0, num_elements);
}

absl::Status NcclBucketTransport::Broadcast(const torch::Tensor& bucket, int64_t k) {
  const absl::Status status = communicator_->Broadcast(
      bucket.data_ptr(), static_cast<size_t>(bucket.numel()) * 4, /*root=*/0,
      TorchCurrentStream(options_.cuda_device), DeadlineAfter(options_));
  if (status.ok()) return status;
  return TransferFailure(options_, absl::StrCat("bucket ", k), status);
}

absl::Status NcclBucketTransport::SendBuckets(BucketSource& source) {
  CudaDeviceScope device(options_.cuda_device);
  if (!device.status().ok()) return TransferFailure(options_, "NCCL send", device.status());
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const int64_t num_elements = plan_.bucket(k).num_elements;
    torch::Tensor buffer = BucketBuffer(num_elements);
    source.Pack(k, buffer, 0, num_elements);  // enqueued on the stream the broadcast uses
    if (absl::Status s = Broadcast(buffer, k); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NcclBucketTransport::ReceiveBuckets(BucketSink& sink) {
  CudaDeviceScope device(options_.cuda_device);
  if (!device.status().ok()) return TransferFailure(options_, "NCCL receive", device.status());
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const int64_t num_elements = plan_.bucket(k).num_elements;
    torch::Tensor target = sink.DirectSlice(k);  // fp32: straight into the staging buffer
    if (!target.defined()) target = BucketBuffer(num_elements);
    if (absl::Status s = Broadcast(target, k); !s.ok()) return s;
    sink.Take(k, target, 0, num_elements);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::weight_sync
