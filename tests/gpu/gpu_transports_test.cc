// The GPU bucket transports end to end (label gpu): a WeightSyncGroup whose weights live on CUDA,
// rank 0 in this process and the receiver in a second one (CUDA IPC cannot open a handle in the
// exporting process, and NCCL wants one process per GPU): this binary re-executed in peer mode,
// chosen by the environment variable below. Each case GTEST_SKIPs without enough GPUs or with a
// LibTorch that has no CUDA (weights cannot live on CUDA then; the CPU-side refusals are
// tests/weight_sync/transport_choice_test.cc).
//
// COMPILED ONLY until a GPU machine runs scripts/gpu_check.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/weight_sync/child_process.h"
#include "tests/weight_sync/synthetic_params.h"
#include "weight_sync/gpu_transports.h"
#include "weight_sync/sync_group.h"

namespace lockstep::weight_sync {
namespace {

using ::lockstep::testing::ChildProcess;
using ::lockstep::testing::FreeLoopbackPort;
using std::chrono::milliseconds;

// "<port>,<rank>,<world size>,<cuda device>,<transport>,<group>"
constexpr char kPeerEnv[] = "LOCKSTEP_GPU_SYNC_PEER";
// Two buckets and a ragged third: every slot of cuda_ipc is reused at least once.
constexpr int64_t kBucketBytes = (int64_t{3} << 20) + 4000;
const testing::SyntheticSpec kSpec{.num_layers = 4, .width = 768, .seed = 31};

GroupOptions OptionsFor(int port, int rank, int world_size, int cuda_device, Transport transport,
                        const std::string& group) {
  GroupOptions options;
  options.store_port = port;
  options.rank = rank;
  options.world_size = world_size;
  options.cuda_device = cuda_device;
  options.transport = transport;
  options.group_name = group;
  options.timeout = milliseconds(60000);
  options.bucket_bytes = kBucketBytes;
  options.verify = true;
  return options;
}

// Version v's parameters: kSpec with seed + v, on the CPU.
TensorMap ParamsOfVersion(int64_t version) {
  testing::SyntheticSpec spec = kSpec;
  spec.seed += static_cast<uint64_t>(version);
  return testing::SyntheticParams(spec);
}

TensorMap OnCpu(const TensorMap& tensors) {
  TensorMap host;
  for (const auto& [name, tensor] : tensors) host.emplace(name, tensor.cpu());
  return host;
}

// Peer mode: joins, receives version 1 as fp32 and version 2 as bf16, checks both bit for bit
// and that they are on its device; prints "ok" or the failure. Returns the exit code.
int RunPeer(const std::string& spec) {
  int port = 0, rank = 0, world_size = 0, cuda_device = 0, transport = 0;
  char group[64] = {0};
  if (std::sscanf(spec.c_str(), "%d,%d,%d,%d,%d,%63s", &port, &rank, &world_size, &cuda_device,
                  &transport, group) != 6) {
    return 9;
  }
  auto fail = [](const std::string& why, int code) {
    std::printf("peer failed: %s\n", why.c_str());
    std::fflush(stdout);
    return code;
  };
  const GroupOptions options = OptionsFor(port, rank, world_size, cuda_device,
                                          static_cast<Transport>(transport), group);
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> joined =
      WeightSyncGroup::Join(options, ManifestOf(ParamsOfVersion(0)));
  if (!joined.ok()) return fail(joined.status().ToString(), 2);
  std::printf("joined %s\n", TransportName((*joined)->transport()));
  std::fflush(stdout);
  for (int64_t version : {1, 2}) {
    const torch::Dtype dtype = version == 1 ? torch::kFloat32 : torch::kBFloat16;
    absl::StatusOr<TensorMap> received = (*joined)->Receive(version, dtype);
    if (!received.ok()) return fail(received.status().ToString(), 3);
    for (const auto& [name, tensor] : *received) {
      if (!tensor.is_cuda() || tensor.device().index() != cuda_device) {
        return fail(absl::StrCat(name, " is on ", tensor.device().str()), 4);
      }
    }
    // The expected values are cast on this device too: a GPU float -> bf16 conversion may write
    // another NaN payload than the CPU's, and the parameters hold a NaN.
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(cuda_device));
    TensorMap expected;
    for (const auto& [name, tensor] : ParamsOfVersion(version)) {
      expected.emplace(name, tensor.to(device).to(dtype).cpu());
    }
    const std::string differs = testing::FirstBitDifference(expected, OnCpu(*received));
    if (!differs.empty()) return fail(absl::StrCat("version ", version, ": ", differs), 5);
  }
  std::printf("ok\n");
  std::fflush(stdout);
  return 0;
}

class PeerModeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (const char* spec = std::getenv(kPeerEnv)) _exit(RunPeer(spec));
  }
};
::testing::Environment* const kPeerMode =
    ::testing::AddGlobalTestEnvironment(new PeerModeEnvironment);

#define LOCKSTEP_REQUIRE_TORCH_CUDA()                                                    \
  do {                                                                                   \
    if (!torch::cuda::is_available() || !GpuTransportsBuilt()) {                         \
      GTEST_SKIP() << "needs a LibTorch with CUDA (-DTorch_DIR) and the GPU transports"; \
    }                                                                                    \
  } while (0)

// Forms a two-rank group on `group` with this process as rank 0 on `sender_device` and a peer
// process on `receiver_device`, checks the transport, sends versions 1 and 2 from CUDA.
void SendToPeer(Transport requested, Transport expected, int sender_device, int receiver_device,
                const std::string& group) {
  const int port = FreeLoopbackPort();
  const std::string peer_spec =
      absl::StrCat(port, ",1,2,", receiver_device, ",", static_cast<int>(requested), ",", group);
  setenv(kPeerEnv, peer_spec.c_str(), 1);
  ChildProcess peer({"/proc/self/exe"});
  unsetenv(kPeerEnv);
  ASSERT_TRUE(peer.started());

  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> sender = WeightSyncGroup::Join(
      OptionsFor(port, 0, 2, sender_device, requested, group), ManifestOf(ParamsOfVersion(0)));
  ASSERT_TRUE(sender.ok()) << sender.status();
  EXPECT_EQ((*sender)->transport(), expected);
  EXPECT_EQ(peer.ReadLine(milliseconds(60000)).value_or("<none>"),
            absl::StrCat("joined ", TransportName(expected)));
  const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(sender_device));
  for (int64_t version : {1, 2}) {
    TensorMap on_device;
    for (const auto& [name, tensor] : ParamsOfVersion(version)) {
      on_device.emplace(name, tensor.to(device));
    }
    const absl::Status sent = (*sender)->Send(on_device, version);
    ASSERT_TRUE(sent.ok()) << sent;
  }
  EXPECT_EQ(peer.ReadLine(milliseconds(60000)).value_or("<none>"), "ok");
  EXPECT_EQ(peer.Wait(milliseconds(60000)), 0);
}

TEST(CudaIpcTransportTest, TrainerAndGeneratorOnOneGpuMoveWeightsBitForBit) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  SendToPeer(Transport::kAuto, Transport::kCudaIpc, 0, 0, "ipc-auto");
}

TEST(CudaIpcTransportTest, ExplicitCudaIpcOnOneGpu) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  SendToPeer(Transport::kCudaIpc, Transport::kCudaIpc, 0, 0, "ipc-explicit");
}

TEST(NcclTransportTest, GeneratorOnAnotherGpuMovesWeightsBitForBit) {
  LOCKSTEP_REQUIRE_GPUS(2);
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  SendToPeer(Transport::kAuto, Transport::kNccl, 0, 1, "nccl-auto");
}

// A peer that never joins: rank 0's Join is DeadlineExceeded within its timeout (the rendezvous
// notices before NCCL init would; nccl_broadcast_test covers an init whose peer never comes).
TEST(NcclTransportTest, MissingPeerIsDeadlineExceededWithinTheTimeout) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  GroupOptions options = OptionsFor(FreeLoopbackPort(), 0, 2, 0, Transport::kNccl, "nccl-alone");
  options.timeout = milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status =
      WeightSyncGroup::Join(options, ManifestOf(ParamsOfVersion(0))).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

// Weights on a CUDA device this process does not have: a clear error naming cuda_device.
TEST(GpuTransportsTest, ADeviceIndexPastTheLastGpuIsAClearError) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  GroupOptions options = OptionsFor(FreeLoopbackPort(), 0, 2, gpu_test::VisibleGpus(),
                                    Transport::kAuto, "no-such-gpu");
  const absl::Status status =
      WeightSyncGroup::Join(options, ManifestOf(ParamsOfVersion(0))).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr(absl::StrCat("cuda_device=", gpu_test::VisibleGpus())));
}

}  // namespace
}  // namespace lockstep::weight_sync
