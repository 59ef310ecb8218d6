#include "weight_sync/c10d_compat.h"

#include <unistd.h>

// ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO, which LibTorch's own build
// defines; Debian's libtorch_cpu exports the Gloo group, so declare it here (this file only).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace lockstep::c10d_compat {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || absl::StartsWith(host, "127.") || host == "::1";
}

// See the constructor's comment in the header.
std::shared_ptr<::gloo::transport::Device> GlooDevice(const std::string& store_host, int rank) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      interface != nullptr && *interface != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  if (rank == 0 || IsLoopback(store_host)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(store_host);
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(store_host);
  }
  return c10d::ProcessGroupGloo::createDeviceForHostname(name);
}

c10d::ReduceOp ToReduceOp(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kSum:
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceKind::kMin:
      return c10d::ReduceOp(c10d::ReduceOp::MIN);
    case ReduceKind::kMax:
      return c10d::ReduceOp(c10d::ReduceOp::MAX);
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

absl::Status CheckCollectiveTensor(const torch::Tensor& tensor) {
  if (!tensor.defined() || tensor.is_sparse() || !tensor.is_contiguous()) {
    return absl::InvalidArgumentError("collective needs a defined, dense, contiguous tensor");
  }
  return absl::OkStatus();
}

}  // namespace

c10::intrusive_ptr<c10d::Store> ConnectTcpStore(const std::string& host, int port, bool is_server,
                                                std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = is_server;
  options.numWorkers = c10::nullopt;
  options.waitWorkers = false;  // the callers' own rendezvous waits, with a clearer error
  options.timeout = timeout;
  options.multiTenant = true;  // a re-formed group in the same process reuses the server
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

c10::intrusive_ptr<c10d::Store> PrefixedStore(const std::string& prefix,
                                              c10::intrusive_ptr<c10d::Store> store) {
  return c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store));
}

std::string ErrorText(const std::exception& error) {
  // c10d throws c10::Error; Gloo's own failures surface from Work::wait as plain exceptions.
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

absl::Status StatusFromException(const std::exception& error, const std::string& what) {
  const std::string text = ErrorText(error);
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string message = absl::StrCat(what, ": ", text);
  if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

// In LibTorch 1.13 ProcessGroupGloo derives from ProcessGroup, in 2.x from Backend; both have
// broadcast/allreduce/allgather with these signatures, so the concrete class is held directly.
struct CollectiveGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

CollectiveGroup::CollectiveGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                 int world_size, const std::string& store_host,
                                 std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(GlooDevice(store_host, rank));
  options->threads = 2;  // one collective runs while the next bucket is being prepared
  impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

CollectiveGroup::~CollectiveGroup() = default;

c10::intrusive_ptr<c10d::Work> CollectiveGroup::StartBroadcast(torch::Tensor& tensor, int root) {
  std::vector<torch::Tensor> tensors = {tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return impl_->group->broadcast(tensors, options);
}

c10::intrusive_ptr<c10d::Work> CollectiveGroup::StartAllReduce(torch::Tensor& tensor,
                                                               ReduceKind kind) {
  std::vector<torch::Tensor> tensors = {tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = ToReduceOp(kind);
  return impl_->group->allreduce(tensors, options);
}

c10::intrusive_ptr<c10d::Work> CollectiveGroup::StartAllGather(std::vector<torch::Tensor>& outputs,
                                                               torch::Tensor& input) {
  std::vector<std::vector<torch::Tensor>> output_lists = {outputs};
  std::vector<torch::Tensor> inputs = {input};
  return impl_->group->allgather(output_lists, inputs);
}

absl::Status CollectiveGroup::Wait(const c10::intrusive_ptr<c10d::Work>& work,
                                   const std::string& what) const {
  try {
    work->wait(timeout_);
    return absl::OkStatus();
  } catch (const std::exception& error) {
    return StatusFromException(error, what);
  }
}

absl::Status CollectiveGroup::AllReduce(torch::Tensor& tensor, ReduceKind kind) {
  if (absl::Status s = CheckCollectiveTensor(tensor); !s.ok()) return s;
  const std::string what = absl::StrCat("all-reduce on rank ", rank_);
  try {
    return Wait(StartAllReduce(tensor, kind), what);
  } catch (const std::exception& error) {
    return StatusFromException(error, what);
  }
}

absl::Status CollectiveGroup::Broadcast(torch::Tensor& tensor, int root) {
  if (absl::Status s = CheckCollectiveTensor(tensor); !s.ok()) return s;
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " out of range"));
  }
  const std::string what = absl::StrCat("broadcast on rank ", rank_);
  try {
    return Wait(StartBroadcast(tensor, root), what);
  } catch (const std::exception& error) {
    return StatusFromException(error, what);
  }
}

void CollectiveGroup::Abandon() {
  // release() hands back the raw pointer without dropping the reference: the group (and its
  // threads) are never destroyed.
  if (impl_ && impl_->group) (void)impl_->group.release();
}

}  // namespace lockstep::c10d_compat
