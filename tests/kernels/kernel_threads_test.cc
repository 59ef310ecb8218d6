// The kernels' LibTorch glue really runs on the intra-op threads: at::parallel_for is inline and
// parallel only where it is compiled with OpenMP, and for a while it was not (every tile ran on
// the calling thread, and the one-thread-equals-two-threads parity checks compared a serial run
// with itself). Also: the bits do not depend on the thread count.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/linear_ops.h"
#include "tests/support/scoped_thread_count.h"

namespace lockstep::kernels {
namespace {

class KernelThreadsTest : public ::testing::Test {
 protected:
  test_support::ScopedThreadCount restore_threads_;
};

TEST_F(KernelThreadsTest, TilesSpreadOverTheIntraOpThreads) {
  at::set_num_threads(1);
  EXPECT_EQ(KernelThreads(), 1);
  at::set_num_threads(2);
  EXPECT_EQ(KernelThreads(), 2);
  EXPECT_EQ(KernelThreads(/*num_items=*/2), 2);
}

TEST_F(KernelThreadsTest, LinearBitsDoNotDependOnTheThreadCount) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const torch::Tensor weight = torch::randn({1000, 300});
  for (const int64_t rows : {1, 8, 100}) {
    const torch::Tensor x = torch::randn({rows, 300});
    at::set_num_threads(1);
    const torch::Tensor one = FixedOrderLinear(x, weight, {});
    at::set_num_threads(2);
    const torch::Tensor two = FixedOrderLinear(x, weight, {});
    EXPECT_TRUE(torch::equal(one, two)) << rows << " rows";
  }
}

}  // namespace
}  // namespace lockstep::kernels
