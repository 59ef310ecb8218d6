// What --threads 0 means: the physical cores this process may use, read from the CPU topology
// (LibTorch's own count comes from cpuinfo, which says 1 on this project's 2-core CI VM), unless
// OMP_NUM_THREADS or MKL_NUM_THREADS chose.
#include "model/compute_threads.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/scoped_env.h"
#include "tests/support/scoped_thread_count.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// A fake /sys/devices/system/cpu: cpuN/topology/thread_siblings_list per entry of `siblings`.
fs::path FakeCpuRoot(const std::string& name, const std::vector<std::string>& siblings) {
  const fs::path root = fs::path(::testing::TempDir()) /
                        ("compute_threads_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (size_t cpu = 0; cpu < siblings.size(); ++cpu) {
    const fs::path topology = root / ("cpu" + std::to_string(cpu)) / "topology";
    fs::create_directories(topology);
    std::ofstream(topology / "thread_siblings_list") << siblings[cpu] << "\n";
  }
  return root;
}

TEST(CountPhysicalCoresTest, CpusSharingSiblingsAreOneCore) {
  // Two cores with two hardware threads each: CPUs 0 and 2 share a core, 1 and 3 the other.
  const fs::path smt = FakeCpuRoot("smt", {"0,2", "1,3", "0,2", "1,3"});
  EXPECT_EQ(CountPhysicalCores(smt, {0, 1, 2, 3}), 2);
  EXPECT_EQ(CountPhysicalCores(smt, {0, 2}), 1);  // an affinity mask of one core's threads
  EXPECT_EQ(CountPhysicalCores(smt, {0, 1}), 2);
  EXPECT_EQ(CountPhysicalCores(smt, {}), 0);
  // Without SMT every CPU is its own core.
  const fs::path plain = FakeCpuRoot("plain", {"0", "1", "2"});
  EXPECT_EQ(CountPhysicalCores(plain, {0, 1, 2}), 3);
  fs::remove_all(smt);
  fs::remove_all(plain);
}

TEST(CountPhysicalCoresTest, UnreadableTopologyIsUnknown) {
  const fs::path root = FakeCpuRoot("partial", {"0", "1"});
  EXPECT_EQ(CountPhysicalCores(root, {0, 1, 5}), 0);  // cpu5 has no topology
  EXPECT_EQ(CountPhysicalCores(root / "missing", {0}), 0);
  fs::remove_all(root);
}

TEST(AvailablePhysicalCoresTest, AtLeastOneAndAtMostTheAffinityMask) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cores = AvailablePhysicalCores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, CPU_COUNT(&set));
}

using test_support::ScopedEnv;

class DefaultComputeThreadsTest : public ::testing::Test {
 protected:
  test_support::ScopedThreadCount restore_threads_;
};

TEST_F(DefaultComputeThreadsTest, ZeroMeansThePhysicalCores) {
  ScopedEnv omp("OMP_NUM_THREADS", nullptr), mkl("MKL_NUM_THREADS", nullptr);
  torch::set_num_threads(3);  // whatever LibTorch had, 0 resolves to the topology's count
  EXPECT_EQ(DefaultComputeThreads(), AvailablePhysicalCores());
  SetComputeThreads(0);
  EXPECT_EQ(torch::get_num_threads(), AvailablePhysicalCores());
  SetComputeThreads(5);
  EXPECT_EQ(torch::get_num_threads(), 5);
}

TEST_F(DefaultComputeThreadsTest, OmpOrMklNumThreadsKeepsLibTorchsCount) {
  torch::set_num_threads(AvailablePhysicalCores() + 2);  // a count the topology cannot give
  {
    ScopedEnv omp("OMP_NUM_THREADS", "4"), mkl("MKL_NUM_THREADS", nullptr);
    EXPECT_EQ(DefaultComputeThreads(), AvailablePhysicalCores() + 2);
  }
  {
    ScopedEnv omp("OMP_NUM_THREADS", nullptr), mkl("MKL_NUM_THREADS", "4");
    SetComputeThreads(0);
    EXPECT_EQ(torch::get_num_threads(), AvailablePhysicalCores() + 2);
  }
}

}  // namespace
}  // namespace lockstep
