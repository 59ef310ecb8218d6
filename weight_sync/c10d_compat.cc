#include "weight_sync/c10d_compat.h"

// ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO, which LibTorch's own build
// defines; Debian's libtorch_cpu exports the Gloo group, so declare it here (this file only).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

namespace lockstep::weight_sync::compat {

c10::intrusive_ptr<c10d::Store> ConnectTcpStore(const std::string& host, int port, bool is_server,
                                                std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = is_server;
  options.numWorkers = c10::nullopt;
  options.waitWorkers = false;  // the group's own rendezvous waits, with a clearer error
  options.timeout = timeout;
  options.multiTenant = true;  // a re-formed group in the same process reuses the server
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

c10::intrusive_ptr<c10d::Store> PrefixedStore(const std::string& prefix,
                                              c10::intrusive_ptr<c10d::Store> store) {
  return c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store));
}

bool NcclAvailable() { return false; }  // see the header: no CUDA/NCCL in this LibTorch

struct CollectiveGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

CollectiveGroup::CollectiveGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                 int world_size, const std::string& device_host,
                                 std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(device_host));
  options->threads = 2;  // one collective runs while the next bucket is being prepared
  impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

CollectiveGroup::~CollectiveGroup() = default;

c10::intrusive_ptr<c10d::Work> CollectiveGroup::Broadcast(torch::Tensor& tensor) {
  std::vector<torch::Tensor> tensors = {tensor};
  c10d::BroadcastOptions options;
  options.rootRank = 0;
  return impl_->group->broadcast(tensors, options);
}

c10::intrusive_ptr<c10d::Work> CollectiveGroup::AllGather(std::vector<torch::Tensor>& outputs,
                                                          torch::Tensor& input) {
  std::vector<std::vector<torch::Tensor>> output_lists = {outputs};
  std::vector<torch::Tensor> inputs = {input};
  return impl_->group->allgather(output_lists, inputs);
}

void CollectiveGroup::Abandon() {
  // release() hands back the raw pointer without dropping the reference: the group (and its
  // threads) are never destroyed.
  if (impl_ && impl_->group) (void)impl_->group.release();
}

}  // namespace lockstep::weight_sync::compat
