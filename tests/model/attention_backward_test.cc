// CausalAttentionBackward (the batch-invariant attention's backward, written out) gives the
// gradients autograd finds through the fast-mode formula ops::CausalAttention: training shapes
// (contiguous keys from position 0) and paged ones (a chunk after cached positions, keys in
// scattered cache rows, rows no query reads getting zero), GQA and MHA, one query and many, in
// one query block and in several (the last one short), with the row passes (attention_backward_cpu.h)
// at every SIMD level.
#include "model/kernels/attention_backward_ops.h"

#include <gtest/gtest.h>

#include "model/kernels/attention_ops.h"
#include "model/ops.h"
#include "tests/kernels/simd_levels.h"

namespace lockstep {
namespace {

struct Case {
  int64_t num_queries, first_position, num_heads, num_kv_heads, head_dim;
  bool scattered;  // keys in random rows of a larger cache, else rows 0 .. positions - 1
};

double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  return ((actual - expected).abs().max() / expected.abs().max()).item<double>();
}

TEST(AttentionBackwardTest, MatchesAutogradThroughTheFormula) {
  const Case cases[] = {
      {37, 0, 6, 2, 16, false},  // training: GQA
      {24, 0, 4, 4, 32, false},  // training: MHA
      {5, 20, 6, 3, 8, true},    // a paged chunk after 20 cached positions
      {1, 33, 4, 1, 16, true},   // decode: one query
      {300, 0, 6, 2, 16, false},  // training in three query blocks, the last one short
      {260, 40, 4, 2, 8, true},   // a paged chunk in three blocks after 40 cached positions
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "queries " << c.num_queries << " after "
                                      << c.first_position << ", heads " << c.num_heads << "/"
                                      << c.num_kv_heads << ", d " << c.head_dim);
    torch::manual_seed(c.num_queries * 100 + c.first_position);
    const int64_t positions = c.first_position + c.num_queries;
    const int64_t cache_rows = c.scattered ? positions + 50 : positions;
    const torch::Tensor q = torch::randn({c.num_queries, c.num_heads, c.head_dim});
    const torch::Tensor keys = torch::randn({cache_rows, c.num_kv_heads, c.head_dim});
    const torch::Tensor values = torch::randn({cache_rows, c.num_kv_heads, c.head_dim});
    const torch::Tensor rows =
        c.scattered ? torch::randperm(cache_rows, torch::kInt64).narrow(0, 0, positions)
                          .contiguous()
                    : torch::arange(positions, torch::kInt64);
    // Non-contiguous, as a gradient arriving through a view can be.
    const torch::Tensor grad_out =
        torch::randn({c.num_heads, c.num_queries, c.head_dim}).transpose(0, 1);

    // Expected: autograd through the formula on the gathered rows, in float64.
    torch::Tensor q64 = q.to(torch::kFloat64).requires_grad_();
    torch::Tensor keys64 = keys.to(torch::kFloat64).requires_grad_();
    torch::Tensor values64 = values.to(torch::kFloat64).requires_grad_();
    ops::CausalAttention(q64, keys64.index_select(0, rows), values64.index_select(0, rows))
        .backward(grad_out.to(torch::kFloat64));

    for (kernels::SimdLevel level : kernels::testing::AvailableSimdLevels()) {
      SCOPED_TRACE(::testing::Message() << "SIMD level " << static_cast<int>(level));
      kernels::testing::ScopedSimdLevel scoped(level);
      const kernels::AttentionGrads grads = kernels::CausalAttentionBackward(
          q, keys, values, rows, c.first_position, grad_out);
      ASSERT_EQ(grads.q.sizes(), q.sizes());
      ASSERT_EQ(grads.keys.sizes(), keys.sizes());
      ASSERT_EQ(grads.values.sizes(), values.sizes());
      EXPECT_LT(RelativeError(grads.q, q64.grad().to(torch::kFloat32)), 1e-5);
      EXPECT_LT(RelativeError(grads.keys, keys64.grad().to(torch::kFloat32)), 1e-5);
      EXPECT_LT(RelativeError(grads.values, values64.grad().to(torch::kFloat32)), 1e-5);
      if (c.scattered) {  // a cache row no position names gets no gradient
        torch::Tensor named =
            torch::zeros({cache_rows}, torch::kBool).index_fill_(0, rows, true);
        EXPECT_EQ(grads.keys.index({named.logical_not()}).abs().sum().item<float>(), 0.0f);
        EXPECT_EQ(grads.values.index({named.logical_not()}).abs().sum().item<float>(), 0.0f);
      }
    }
  }
}

// Through the op: FixedOrderAttention's backward is this function (not a recompute).
TEST(AttentionBackwardTest, FixedOrderAttentionBackpropagatesIt) {
  torch::manual_seed(3);
  const torch::Tensor q = torch::randn({9, 4, 16}).requires_grad_();
  const torch::Tensor keys = torch::randn({9, 2, 16}).requires_grad_();
  const torch::Tensor values = torch::randn({9, 2, 16}).requires_grad_();
  const torch::Tensor rows = torch::arange(9, torch::kInt64);
  const torch::Tensor grad_out = torch::randn({9, 4, 16});
  kernels::FixedOrderAttention(q, keys, values, rows, 0).backward(grad_out);
  const kernels::AttentionGrads direct = kernels::CausalAttentionBackward(
      q.detach(), keys.detach(), values.detach(), rows, 0, grad_out);
  EXPECT_TRUE(torch::equal(q.grad(), direct.q));
  EXPECT_TRUE(torch::equal(keys.grad(), direct.keys));
  EXPECT_TRUE(torch::equal(values.grad(), direct.values));
}

}  // namespace
}  // namespace lockstep
