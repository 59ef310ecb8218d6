#include "trainer/c10d_compat.h"

// ProcessGroupGloo.hpp is empty unless USE_C10D_GLOO is defined; Debian's LibTorch ships Gloo
// (libtorch_cpu exports ProcessGroupGloo) but its headers leave the macro to the build.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::trainer {
namespace {

// LibTorch and Gloo report failures as exceptions whose text is the only clue; a timeout is the
// one case callers act on differently.
absl::Status FromException(const std::exception& error, const std::string& what) {
  std::string message = error.what();
  // c10::Error appends a C++ backtrace after the first line; keep the first line.
  const size_t newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string text = absl::StrCat(what, ": ", message);
  if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
    return absl::DeadlineExceededError(text);
  }
  return absl::UnavailableError(text);
}

// The Gloo transport device: GLOO_SOCKET_IFNAME when set (as PyTorch does), loopback when the
// master is on this host's loopback, else the address this host's name resolves to.
std::shared_ptr<::gloo::transport::Device> GlooDevice(const std::string& master_addr) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      interface != nullptr && *interface != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
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

}  // namespace

// In LibTorch 1.13 ProcessGroupGloo derives from ProcessGroup, in 2.x from Backend; both have
// allreduce/broadcast with these signatures, so the concrete classes are held directly.
struct CollectiveGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#ifdef USE_C10D_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif

  template <typename Call>
  absl::Status Run(const Call& call, std::chrono::milliseconds timeout, const std::string& what) {
    try {
      auto work = call();
      work->wait(timeout);
      return absl::OkStatus();
    } catch (const std::exception& error) {
      return FromException(error, what);
    }
  }
};

CollectiveGroup::CollectiveGroup(const CollectiveGroupOptions& options, std::unique_ptr<Impl> impl)
    : options_(options), impl_(std::move(impl)) {}

CollectiveGroup::~CollectiveGroup() = default;

absl::StatusOr<std::unique_ptr<CollectiveGroup>> CollectiveGroup::Create(
    const CollectiveGroupOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size must be >= 1, got ", options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", options.world_size, "), got ", options.rank));
  }
  if (options.master_port < 1 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master_port must be in [1, 65535], got ", options.master_port));
  }
  if (options.master_addr.empty()) return absl::InvalidArgumentError("master_addr is empty");
  if (options.timeout.count() <= 0) return absl::InvalidArgumentError("timeout must be > 0");
#ifndef USE_C10D_NCCL
  if (options.backend == CollectiveBackend::kNccl) {
    return absl::FailedPreconditionError(
        "the NCCL backend is not built: this LibTorch has no CUDA/NCCL (use Gloo on CPU)");
  }
#endif

  auto impl = std::make_unique<Impl>();
  const std::string where = absl::StrCat(options.master_addr, ":", options.master_port);
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(options.master_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = options.world_size;
    store_options.waitWorkers = false;  // the process group's rendezvous waits, with the timeout
    store_options.timeout = options.timeout;
    auto tcp_store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    impl->store = c10::make_intrusive<c10d::PrefixStore>(options.store_prefix, tcp_store);
  } catch (const std::exception& error) {
    return FromException(error, absl::StrCat("TCPStore at ", where, " (rank ", options.rank, ")"));
  }
  try {
    if (options.backend == CollectiveBackend::kGloo) {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
      gloo_options->devices.push_back(GlooDevice(options.master_addr));
      gloo_options->threads = 2;
      impl->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, options.rank,
                                                               options.world_size, gloo_options);
    }
#ifdef USE_C10D_NCCL
    // Not compiled on CPU builds (Debian's LibTorch); kept to the constructor shared by 1.13
    // and 2.x.
    if (options.backend == CollectiveBackend::kNccl) {
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = options.timeout;
      impl->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, options.rank,
                                                               options.world_size, nccl_options);
    }
#endif
  } catch (const std::exception& error) {
    return FromException(error, absl::StrCat("process group rendezvous at ", where, " (rank ",
                                             options.rank, " of ", options.world_size, ")"));
  }
  return std::unique_ptr<CollectiveGroup>(new CollectiveGroup(options, std::move(impl)));
}

absl::Status CollectiveGroup::AllReduce(torch::Tensor& tensor, ReduceKind kind) {
  if (!tensor.defined() || !tensor.is_contiguous() || tensor.is_sparse()) {
    return absl::InvalidArgumentError("collective needs a defined, dense, contiguous tensor");
  }
  std::vector<torch::Tensor> tensors = {tensor};
  c10d::AllreduceOptions reduce_options;
  reduce_options.reduceOp = ToReduceOp(kind);
  reduce_options.timeout = options_.timeout;
  const std::string what = absl::StrCat("all-reduce on rank ", options_.rank);
#ifdef USE_C10D_NCCL
  if (impl_->nccl) {
    return impl_->Run([&] { return impl_->nccl->allreduce(tensors, reduce_options); },
                      options_.timeout, what);
  }
#endif
  return impl_->Run([&] { return impl_->gloo->allreduce(tensors, reduce_options); },
                    options_.timeout, what);
}

absl::Status CollectiveGroup::Broadcast(torch::Tensor& tensor, int root) {
  if (!tensor.defined() || !tensor.is_contiguous() || tensor.is_sparse()) {
    return absl::InvalidArgumentError("collective needs a defined, dense, contiguous tensor");
  }
  std::vector<torch::Tensor> tensors = {tensor};
  if (root < 0 || root >= options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " out of range"));
  }
  c10d::BroadcastOptions broadcast_options;
  broadcast_options.rootRank = root;
  broadcast_options.timeout = options_.timeout;
  const std::string what = absl::StrCat("broadcast on rank ", options_.rank);
#ifdef USE_C10D_NCCL
  if (impl_->nccl) {
    return impl_->Run([&] { return impl_->nccl->broadcast(tensors, broadcast_options); },
                      options_.timeout, what);
  }
#endif
  return impl_->Run([&] { return impl_->gloo->broadcast(tensors, broadcast_options); },
                    options_.timeout, what);
}

}  // namespace lockstep::trainer
