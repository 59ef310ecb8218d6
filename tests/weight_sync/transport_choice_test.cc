// Transport selection (label weight_sync, runs on CPU): the names and their validation, the
// choice table of weight_sync/transport_choice.h for every combination of weight devices, hosts
// and GPUs (pure, so GPU rows are checked without a GPU), and what Join does here when weights
// are asked to be on CUDA: a clear error naming the key, never a hang.
#include "weight_sync/transport_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/weight_sync/child_process.h"
#include "weight_sync/gpu_transports.h"
#include "weight_sync/sync_group.h"

namespace lockstep::weight_sync {
namespace {

using ::lockstep::testing::FreeLoopbackPort;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kHostA[] = "alpha\nboot-1";
constexpr char kHostB[] = "beta\nboot-2";
constexpr char kGpu0[] = "cuda:00112233445566778899aabbccddeeff";
constexpr char kGpu1[] = "cuda:ffeeddccbbaa99887766554433221100";

GroupOptions Options(Transport transport, int world_size, int cuda_device) {
  GroupOptions options;
  options.store_port = 1234;
  options.world_size = world_size;
  options.transport = transport;
  options.cuda_device = cuda_device;
  return options;
}

absl::StatusOr<Transport> Choose(Transport requested, std::vector<std::string> hosts,
                                 std::vector<std::string> devices) {
  const int cuda_device = devices[0] == kCpuWeights ? -1 : 0;
  return ChooseTransport(Options(requested, static_cast<int>(hosts.size()), cuda_device), hosts,
                         devices, "group 'g'");
}

TEST(TransportChoiceTest, NamesRoundTripAndUnknownNamesListEveryTransport) {
  for (Transport t : {Transport::kAuto, Transport::kGloo, Transport::kSharedMemory,
                      Transport::kNccl, Transport::kCudaIpc}) {
    EXPECT_EQ(ParseTransport(TransportName(t)).value(), t);
  }
  EXPECT_STREQ(TransportName(Transport::kNccl), "nccl");
  EXPECT_STREQ(TransportName(Transport::kCudaIpc), "cuda_ipc");
  const absl::Status unknown = ParseTransport("rdma").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()),
              AllOf(HasSubstr("'rdma'"), HasSubstr("nccl"), HasSubstr("cuda_ipc")));
  EXPECT_TRUE(IsGpuTransport(Transport::kNccl));
  EXPECT_TRUE(IsGpuTransport(Transport::kCudaIpc));
  EXPECT_FALSE(IsGpuTransport(Transport::kAuto));
  EXPECT_FALSE(IsGpuTransport(Transport::kSharedMemory));
}

TEST(TransportChoiceTest, ValidateRefusesAGpuTransportForWeightsOnTheCpuNamingTheKey) {
  for (Transport t : {Transport::kNccl, Transport::kCudaIpc}) {
    const absl::Status status = Options(t, 2, -1).Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr(absl::StrCat("transport=", TransportName(t))),
                      HasSubstr("cuda_device is -1")));
    EXPECT_TRUE(Options(t, 2, 0).Validate().ok());
  }
  for (Transport t : {Transport::kGloo, Transport::kSharedMemory}) {
    const absl::Status status = Options(t, 2, 1).Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr(absl::StrCat("transport=", TransportName(t))),
                      HasSubstr("cuda_device is 1")));
  }
  EXPECT_TRUE(Options(Transport::kAuto, 2, 0).Validate().ok());
  EXPECT_THAT(std::string(Options(Transport::kAuto, 2, -2).Validate().message()),
              HasSubstr("cuda_device must be -1"));
  EXPECT_THAT(std::string(Options(static_cast<Transport>(5), 2, -1).Validate().message()),
              HasSubstr("cuda_ipc (4), got 5"));
}

TEST(TransportChoiceTest, WeightsInHostMemoryKeepTheCpuTransports) {
  const std::string cpu = kCpuWeights;
  EXPECT_EQ(Choose(Transport::kAuto, {kHostA, kHostA}, {cpu, cpu}).value(),
            Transport::kSharedMemory);
  EXPECT_EQ(Choose(Transport::kAuto, {kHostA, kHostB}, {cpu, cpu}).value(), Transport::kGloo);
  EXPECT_EQ(Choose(Transport::kGloo, {kHostA, kHostA}, {cpu, cpu}).value(), Transport::kGloo);
  EXPECT_EQ(Choose(Transport::kSharedMemory, {kHostA, kHostA, kHostA}, {cpu, cpu, cpu}).value(),
            Transport::kSharedMemory);
  EXPECT_EQ(Choose(Transport::kAuto, {kHostA}, {cpu}).value(), Transport::kGloo);
  const absl::Status across = Choose(Transport::kSharedMemory, {kHostA, kHostB}, {cpu, cpu}).status();
  EXPECT_EQ(across.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(across.message()),
              AllOf(HasSubstr("transport=shm needs every rank on one host"),
                    HasSubstr("'alpha'"), HasSubstr("'beta'")));
}

TEST(TransportChoiceTest, WeightsOnCudaPickCudaIpcOnOneGpuAndNcclOtherwise) {
  EXPECT_EQ(Choose(Transport::kAuto, {kHostA, kHostA}, {kGpu0, kGpu0}).value(),
            Transport::kCudaIpc);
  EXPECT_EQ(Choose(Transport::kAuto, {kHostA, kHostA, kHostA}, {kGpu0, kGpu0, kGpu1}).value(),
            Transport::kNccl);
  EXPECT_EQ(Choose(Transport::kAuto, {kHostA, kHostB}, {kGpu0, kGpu0}).value(), Transport::kNccl);
  EXPECT_EQ(Choose(Transport::kNccl, {kHostA, kHostA}, {kGpu0, kGpu0}).value(), Transport::kNccl);
  EXPECT_EQ(Choose(Transport::kCudaIpc, {kHostA, kHostA}, {kGpu0, kGpu1}).value(),
            Transport::kCudaIpc);
  const absl::Status across = Choose(Transport::kCudaIpc, {kHostA, kHostB}, {kGpu0, kGpu0}).status();
  EXPECT_EQ(across.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(across.message()),
              AllOf(HasSubstr("transport=cuda_ipc needs every rank on one host"),
                    HasSubstr("use transport=auto or nccl")));
}

TEST(TransportChoiceTest, MixedCpuAndCudaWeightsAreRefusedNamingBothRanks) {
  const absl::Status status =
      Choose(Transport::kAuto, {kHostA, kHostA, kHostA}, {kGpu0, kGpu0, kCpuWeights}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("group 'g'"), HasSubstr(std::string("rank 0's weights are on ") + kGpu0),
                    HasSubstr("rank 2's on cpu")));
}

TEST(TransportChoiceTest, CpuTransportsWhenEveryRankSaysCudaAreRefused) {
  const absl::Status status =
      ChooseTransport(Options(Transport::kSharedMemory, 2, -1), {kHostA, kHostA}, {kGpu0, kGpu0},
                      "group 'g'")
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("transport=shm moves host memory"));
}

// Weights asked to be on CUDA where this process cannot hold them (no GPU, or a CPU-only
// LibTorch, or a build without NCCL): Join fails at once on this rank, before any store, with
// an error naming cuda_device and the transport. Where a CUDA LibTorch sees a GPU this case does
// not apply (tests/gpu covers it).
TEST(TransportChoiceJoinTest, WeightsOnCudaWithoutAUsableGpuAreAClearErrorNamingTheKey) {
  if (GpuTransportsBuilt() && torch::cuda::is_available()) {
    GTEST_SKIP() << "this process can hold weights on CUDA";
  }
  for (Transport t : {Transport::kNccl, Transport::kCudaIpc, Transport::kAuto}) {
    GroupOptions options = Options(t, 2, 0);
    options.store_port = FreeLoopbackPort();  // nobody listens: the error must come first
    options.timeout = std::chrono::milliseconds(60000);
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = WeightSyncGroup::Join(options, Manifest{{{"a", {4}}}}).status();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_EQ(status.code(), GpuTransportsBuilt() ? absl::StatusCode::kFailedPrecondition
                                                  : absl::StatusCode::kUnimplemented)
        << status;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("cuda_device=0"),
                      HasSubstr(absl::StrCat("transport=", TransportName(t)))));
  }
}

TEST(TransportChoiceJoinTest, AGpuTransportForWeightsOnTheCpuIsRefusedAtJoin) {
  GroupOptions options = Options(Transport::kNccl, 2, -1);
  const absl::Status status = WeightSyncGroup::Join(options, Manifest{{{"a", {4}}}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("transport=nccl"));
}

// What a service sets its group's cuda_device from: its weights' device. Host tensors (every
// service's today) give -1, so auto stays on the CPU transports and nccl / cuda_ipc are refused.
TEST(WeightsCudaDeviceTest, WeightsInHostMemoryAreMinusOne) {
  EXPECT_EQ(WeightsCudaDevice({}).value(), -1);
  const TensorMap host = {{"a.weight", torch::zeros({2, 3})},
                          {"b.weight", torch::zeros({4}, torch::kBFloat16)}};
  EXPECT_EQ(WeightsCudaDevice(host).value(), -1);
  GroupOptions options;
  options.store_port = 1;
  options.transport = Transport::kNccl;
  options.cuda_device = WeightsCudaDevice(host).value();
  EXPECT_THAT(std::string(options.Validate().message()),
              AllOf(HasSubstr("transport=nccl"), HasSubstr("weights on the CPU")));
}

}  // namespace
}  // namespace lockstep::weight_sync
