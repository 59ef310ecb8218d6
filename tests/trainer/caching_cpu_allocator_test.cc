#include "trainer/caching_cpu_allocator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>
#include <vector>

namespace lockstep::trainer {
namespace {

class CachingCpuAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { InstallCachingCpuAllocator(); }
};

TEST_F(CachingCpuAllocatorTest, ReusesAFreedLargeBlock) {
  const int64_t elements = 4 << 20;  // 16 MiB of float32
  void* first = nullptr;
  {
    torch::Tensor t = torch::empty({elements}, torch::kFloat32);
    first = t.data_ptr();
  }
  const CachingCpuAllocatorStats before = GetCachingCpuAllocatorStats();
  EXPECT_GE(before.cached_bytes, static_cast<size_t>(elements) * 4);
  torch::Tensor again = torch::empty({elements}, torch::kFloat32);
  EXPECT_EQ(again.data_ptr(), first);
  const CachingCpuAllocatorStats after = GetCachingCpuAllocatorStats();
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.misses, before.misses);
}

TEST_F(CachingCpuAllocatorTest, ServesASlightlySmallerRequestButNotAMuchSmallerOne) {
  const int64_t elements = 6 << 20;
  { torch::Tensor t = torch::empty({elements}, torch::kFloat32); }
  const CachingCpuAllocatorStats start = GetCachingCpuAllocatorStats();
  {
    torch::Tensor t = torch::empty({elements - elements / 10}, torch::kFloat32);  // 90%: fits
  }
  EXPECT_EQ(GetCachingCpuAllocatorStats().hits, start.hits + 1);
  torch::Tensor small = torch::empty({elements / 3}, torch::kFloat32);  // 33%: too wasteful
  EXPECT_EQ(GetCachingCpuAllocatorStats().misses, start.misses + 1);
}

TEST_F(CachingCpuAllocatorTest, SmallTensorsAreNotPooled) {
  const CachingCpuAllocatorStats start = GetCachingCpuAllocatorStats();
  for (int i = 0; i < 100; ++i) torch::Tensor t = torch::ones({1000}, torch::kFloat32);
  const CachingCpuAllocatorStats end = GetCachingCpuAllocatorStats();
  EXPECT_EQ(end.hits, start.hits);
  EXPECT_EQ(end.misses, start.misses);
}

TEST_F(CachingCpuAllocatorTest, ReusedMemoryComputesCorrectlyFromManyThreads) {
  std::vector<std::thread> threads;
  std::vector<double> sums(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([k, &sums] {
      double total = 0;
      for (int i = 0; i < 20; ++i) {
        torch::Tensor t = torch::full({1 << 19}, static_cast<float>(k + 1), torch::kFloat32);
        total += t.sum().item<double>();
      }
      sums[k] = total;
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(sums[k], 20.0 * (k + 1) * (1 << 19));
}

}  // namespace
}  // namespace lockstep::trainer
