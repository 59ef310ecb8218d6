// weight_sync/nccl_broadcast.h: argument checks (no GPU needed), a one-rank broadcast, the init
// deadline with a peer that never joins (one GPU), and a two-rank broadcast (two GPUs).
#include "weight_sync/nccl_broadcast.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/gpu/gpu_test_util.h"

namespace lockstep::weight_sync {
namespace {

using ::lockstep::gpu_test::DeviceBuffer;
using ::lockstep::gpu_test::RandomFloats;
using ::lockstep::gpu_test::SameBits;

TEST(NcclBroadcastArgumentsTest, CreateRefusesBadIdBytesAndRanks) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  const std::string id(kNcclUniqueIdBytes, '\0');
  EXPECT_TRUE(absl::IsInvalidArgument(NcclCommunicator::Create("", 0, 1, deadline).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      NcclCommunicator::Create(std::string(kNcclUniqueIdBytes - 1, 'x'), 0, 1, deadline).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NcclCommunicator::Create(id + "x", 0, 1, deadline).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NcclCommunicator::Create(id, 0, 0, deadline).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NcclCommunicator::Create(id, 1, 1, deadline).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NcclCommunicator::Create(id, -1, 2, deadline).status()));
}

TEST(NcclBroadcastArgumentsTest, BroadcastRefusesNullZeroBytesAndBadRoot) {
  float x = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckBroadcastArguments(nullptr, 4, 0, 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckBroadcastArguments(&x, 0, 0, 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckBroadcastArguments(&x, 4, 1, 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckBroadcastArguments(&x, 4, -1, 2)));
  EXPECT_TRUE(CheckBroadcastArguments(&x, 4, 1, 2).ok());
}

TEST(NcclBroadcastTest, SingleRankBroadcastKeepsTheBuffer) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_CUDA_OK(cudaSetDevice(0));
  absl::StatusOr<std::string> id = NcclUniqueIdBytes();
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(id->size(), kNcclUniqueIdBytes);
  auto comm = NcclCommunicator::Create(*id, 0, 1, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->device(), 0);

  const std::vector<float> values = RandomFloats(1 << 20, 7);
  DeviceBuffer<float> buffer(values);
  cudaStream_t stream;
  LOCKSTEP_CUDA_OK(cudaStreamCreate(&stream));
  absl::Status status = (*comm)->Broadcast(buffer.get(), values.size() * sizeof(float), 0, stream,
                                           absl::Now() + absl::Seconds(30));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(SameBits(buffer.ToHost().data(), values.data(), values.size()));

  status = (*comm)->Close(absl::Now() + absl::Seconds(30));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_FALSE((*comm)->usable());
  status = (*comm)->Broadcast(buffer.get(), 4, 0, stream, absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  LOCKSTEP_CUDA_OK(cudaStreamDestroy(stream));
}

// The hang this layer exists to prevent: a rank whose peer never shows up returns within its
// deadline with an error naming it, instead of waiting forever.
TEST(NcclBroadcastTest, InitWithAMissingPeerFailsAtTheDeadline) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_CUDA_OK(cudaSetDevice(0));
  absl::StatusOr<std::string> id = NcclUniqueIdBytes();
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Time start = absl::Now();
  auto comm = NcclCommunicator::Create(*id, 0, 2, start + absl::Seconds(3));
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_NE(comm.status().message().find("rank 0 of 2"), std::string::npos) << comm.status();
  EXPECT_GE(elapsed, absl::Seconds(3));
  EXPECT_LT(elapsed, absl::Seconds(30)) << "the abort itself must not hang";
}

TEST(NcclBroadcastTest, TwoRanksReceiveRootsBytes) {
  LOCKSTEP_REQUIRE_GPUS(2);
  absl::StatusOr<std::string> id = NcclUniqueIdBytes();
  ASSERT_TRUE(id.ok()) << id.status();
  const std::vector<float> values = RandomFloats(3 << 20, 11);
  std::vector<float> received[2];
  absl::Status statuses[2];
  auto run_rank = [&](int rank) {
    cudaError_t error = cudaSetDevice(rank);
    if (error != cudaSuccess) {
      statuses[rank] = absl::InternalError(cudaGetErrorString(error));
      return;
    }
    // Rank 1 starts from zeros: only the broadcast can give it root's values.
    DeviceBuffer<float> buffer(rank == 0 ? values : std::vector<float>(values.size(), 0.0f));
    cudaStream_t stream;
    if (cudaStreamCreate(&stream) != cudaSuccess) {
      statuses[rank] = absl::InternalError("cudaStreamCreate");
      return;
    }
    auto comm = NcclCommunicator::Create(*id, rank, 2, absl::Now() + absl::Seconds(60));
    statuses[rank] = comm.status();
    if (comm.ok()) {
      statuses[rank] = (*comm)->Broadcast(buffer.get(), values.size() * sizeof(float), 0, stream,
                                          absl::Now() + absl::Seconds(60));
      if (statuses[rank].ok()) statuses[rank] = (*comm)->Close(absl::Now() + absl::Seconds(30));
    }
    received[rank] = buffer.ToHost();
    cudaStreamDestroy(stream);
  };
  std::thread rank1(run_rank, 1);
  run_rank(0);
  rank1.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
    ASSERT_EQ(received[rank].size(), values.size());
    EXPECT_TRUE(SameBits(received[rank].data(), values.data(), values.size())) << "rank " << rank;
  }
}

}  // namespace
}  // namespace lockstep::weight_sync
