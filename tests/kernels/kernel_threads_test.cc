// The kernels' LibTorch glue really runs on the intra-op threads: at::parallel_for is inline and
// parallel only where it is compiled with OpenMP, and for a while it was not (every tile ran on
// the calling thread, and the one-thread-equals-two-threads parity checks compared a serial run
// with itself). Also: the bits do not depend on the thread count.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

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

// Several weights through one x in one region (q, k and v): each output is the bits
// FixedOrderLinear gives that weight alone, at 1 and 2 threads, for 2-D and 3-D x, with and
// without a bias; with a graph to record, also the gradients.
TEST_F(KernelThreadsTest, LinearsGiveEachWeightTheBitsItGetsAlone) {
  torch::manual_seed(6);
  const std::vector<torch::Tensor> weights = {torch::randn({768, 300}), torch::randn({130, 300}),
                                              torch::randn({130, 300})};
  const std::vector<torch::Tensor> biases = {torch::randn({768}), torch::Tensor(),
                                             torch::randn({130})};
  for (const int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{1, 300}, {8, 300}, {100, 300}, {2, 5, 300}}) {
      const torch::Tensor x = torch::randn(shape);
      torch::NoGradGuard no_grad;
      const std::vector<torch::Tensor> together = FixedOrderLinears(x, weights, biases);
      ASSERT_EQ(together.size(), weights.size());
      for (size_t i = 0; i < weights.size(); ++i) {
        const torch::Tensor alone = FixedOrderLinear(x, weights[i], biases[i]);
        EXPECT_EQ(together[i].sizes(), alone.sizes());
        EXPECT_TRUE(torch::equal(together[i], alone))
            << "weight " << i << ", x " << x.sizes() << ", " << threads << " threads";
      }
    }
  }
  // With a graph: the same outputs, and gradients as if each weight ran alone.
  const torch::Tensor x = torch::randn({4, 300}).requires_grad_(true);
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& w : weights) leaves.push_back(w.clone().requires_grad_(true));
  const std::vector<torch::Tensor> together = FixedOrderLinears(x, leaves, biases);
  torch::Tensor loss = torch::zeros({});
  for (size_t i = 0; i < leaves.size(); ++i) {
    EXPECT_TRUE(torch::equal(together[i], FixedOrderLinear(x, weights[i], biases[i]).detach()));
    loss = loss + together[i].sum() * static_cast<double>(i + 1);
  }
  loss.backward();
  for (size_t i = 0; i < leaves.size(); ++i) {
    ASSERT_TRUE(leaves[i].grad().defined()) << "weight " << i;
    EXPECT_TRUE(torch::allclose(
        leaves[i].grad(), (i + 1.0) * torch::ones({4, weights[i].size(0)}).t().matmul(x.detach()),
        /*rtol=*/1e-5, /*atol=*/1e-4))
        << "weight " << i;
  }
  EXPECT_THROW(FixedOrderLinears(x, weights, {torch::Tensor()}), c10::Error);
}

}  // namespace
}  // namespace lockstep::kernels
