#include "weight_sync/cuda_ipc_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weight_sync/gloo_transport.h"
#include "weight_sync/gpu_device.h"
#include "weight_sync/gpu_status.h"
#include "weight_sync/rendezvous.h"

namespace lockstep::weight_sync {
namespace {

constexpr char kIpcHandleKey[] = "cuda_ipc/handle";
std::string OpenedKey(int rank) { return absl::StrCat("cuda_ipc/opened/", rank); }

absl::Time DeadlineAfter(const GroupOptions& options) {
  return absl::Now() + absl::FromChrono(options.timeout);
}

absl::Status Prefixed(const std::string& where, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(where, ": CUDA IPC set-up: ", status.message()));
}

// Rank 0's half of Connect: the slots, the handle, every receiver's answer.
absl::StatusOr<void*> ExportSlots(const GroupOptions& options, c10d::Store& store,
                                  size_t slot_bytes, const std::string& where) {
  void* slots = nullptr;
  absl::Status status = CudaStatus(cudaMalloc(&slots, 2 * slot_bytes),
                                   absl::StrCat("cudaMalloc of 2 x ", slot_bytes, " bytes"));
  if (!status.ok()) {
    SetText(store, kIpcHandleKey, "");  // the receivers fail at once instead of timing out
    return Prefixed(where, status);
  }
  absl::StatusOr<std::string> handle = ExportCudaIpcHandle(slots, 2 * slot_bytes);
  if (!handle.ok()) {
    cudaFree(slots);
    SetText(store, kIpcHandleKey, "");
    return Prefixed(where, handle.status());
  }
  SetText(store, kIpcHandleKey, *handle);
  status = WaitForRanks(store, OpenedKey, 1, options, where, "opened the CUDA IPC handle");
  for (int r = 1; status.ok() && r < options.world_size; ++r) {
    const std::string answer = GetText(store, OpenedKey(r));
    if (answer != "ok") {
      status = absl::FailedPreconditionError(absl::StrCat(
          where, ": rank ", r, " could not open rank 0's CUDA IPC handle: ", answer,
          " (transport=cuda_ipc needs every rank on one host; use nccl otherwise)"));
    }
  }
  if (!status.ok()) {
    cudaFree(slots);
    return status;
  }
  return slots;
}

// A receiver's half: the handle, opened, and the answer for rank 0.
absl::StatusOr<std::unique_ptr<CudaIpcBuffer>> OpenSlots(const GroupOptions& options,
                                                         c10d::Store& store,
                                                         const std::string& where) {
  try {
    store.wait({kIpcHandleKey}, options.timeout);
  } catch (const std::exception&) {
    return absl::DeadlineExceededError(absl::StrCat(
        where, ": rank 0 published no CUDA IPC handle within ", options.timeout.count(), " ms"));
  }
  const std::string handle = GetText(store, kIpcHandleKey);
  if (handle.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": rank 0 could not export its CUDA IPC slots"));
  }
  absl::StatusOr<std::unique_ptr<CudaIpcBuffer>> opened = CudaIpcBuffer::Open(handle);
  SetText(store, OpenedKey(options.rank),
          opened.ok() ? "ok" : std::string(opened.status().message()));
  if (!opened.ok()) return Prefixed(where, opened.status());
  return opened;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaIpcBucketTransport>> CudaIpcBucketTransport::Connect(
    const GroupOptions& options, c10d::Store& store, const BucketPlan& plan,
    c10d_compat::CollectiveGroup& control, const std::string& where) {
  CudaDeviceScope device(options.cuda_device);
  if (!device.status().ok()) return Prefixed(where, device.status());
  const size_t slot_bytes =
      static_cast<size_t>(std::max<int64_t>(1, std::min(plan.bucket_elements(),
                                                        plan.num_elements()))) * 4;
  try {
    if (options.rank == 0) {
      absl::StatusOr<void*> slots = ExportSlots(options, store, slot_bytes, where);
      if (!slots.ok()) return slots.status();
      return std::unique_ptr<CudaIpcBucketTransport>(
          new CudaIpcBucketTransport(options, plan, control, *slots, nullptr));
    }
    absl::StatusOr<std::unique_ptr<CudaIpcBuffer>> opened = OpenSlots(options, store, where);
    if (!opened.ok()) return opened.status();
    return std::unique_ptr<CudaIpcBucketTransport>(
        new CudaIpcBucketTransport(options, plan, control, nullptr, *std::move(opened)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(where, ": CUDA IPC set-up: store failed: ", c10d_compat::ErrorText(e)));
  }
}

CudaIpcBucketTransport::CudaIpcBucketTransport(const GroupOptions& options,
                                               const BucketPlan& plan,
                                               c10d_compat::CollectiveGroup& control, void* slots,
                                               std::unique_ptr<CudaIpcBuffer> opened)
    : options_(options),
      plan_(plan),
      control_(control),
      slots_(slots),
      opened_(std::move(opened)) {}

CudaIpcBucketTransport::~CudaIpcBucketTransport() {
  if (slots_ != nullptr) {
    CudaDeviceScope device(options_.cuda_device);
    cudaFree(slots_);
  }
}

int64_t CudaIpcBucketTransport::SlotElements() const {
  return std::max<int64_t>(1, std::min(plan_.bucket_elements(), plan_.num_elements()));
}

absl::Status CudaIpcBucketTransport::Barrier(int64_t k) {
  torch::Tensor token = torch::zeros({1}, torch::kInt32);
  const std::string what =
      k == plan_.num_buckets() ? std::string("CUDA IPC hand-over end")
                               : absl::StrCat("CUDA IPC hand-over of bucket ", k);
  return WaitCollective(options_, control_,
                        control_.StartAllReduce(token, c10d_compat::ReduceKind::kSum), what);
}

absl::Status CudaIpcBucketTransport::SendBuckets(BucketSource& source) {
  CudaDeviceScope device(options_.cuda_device);
  if (!device.status().ok()) return TransferFailure(options_, "CUDA IPC send", device.status());
  const cudaStream_t stream = TorchCurrentStream(options_.cuda_device);
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const int64_t num_elements = plan_.bucket(k).num_elements;
    float* slot = static_cast<float*>(slots_) + (k % 2) * SlotElements();
    source.Pack(k, WrapDeviceFloats(slot, num_elements, options_.cuda_device), 0, num_elements);
    absl::Status s = WaitForStream(stream, DeadlineAfter(options_),
                                   absl::StrCat("packing bucket ", k, " into its CUDA IPC slot"));
    if (!s.ok()) return TransferFailure(options_, absl::StrCat("bucket ", k), s);
    if (s = Barrier(k); !s.ok()) return s;
  }
  return Barrier(plan_.num_buckets());  // every receiver has copied the last bucket out
}

absl::Status CudaIpcBucketTransport::ReceiveBuckets(BucketSink& sink) {
  CudaDeviceScope device(options_.cuda_device);
  if (!device.status().ok()) {
    return TransferFailure(options_, "CUDA IPC receive", device.status());
  }
  const cudaStream_t stream = TorchCurrentStream(options_.cuda_device);
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    if (absl::Status s = Barrier(k); !s.ok()) return s;
    const int64_t num_elements = plan_.bucket(k).num_elements;
    torch::Tensor target = sink.DirectSlice(k);  // fp32: straight into the staging buffer
    if (!target.defined()) {
      if (!bucket_buffer_.defined()) bucket_buffer_ = DeviceFloats(SlotElements(), options_.cuda_device);
      target = bucket_buffer_.narrow(0, 0, num_elements);
    }
    const size_t offset = static_cast<size_t>((k % 2) * SlotElements()) * 4;
    absl::Status s = opened_->CopyTo(target.data_ptr(), offset,
                                     static_cast<size_t>(num_elements) * 4, stream,
                                     DeadlineAfter(options_));
    if (!s.ok()) return TransferFailure(options_, absl::StrCat("bucket ", k), s);
    sink.Take(k, target, 0, num_elements);
  }
  return Barrier(plan_.num_buckets());
}

}  // namespace lockstep::weight_sync
