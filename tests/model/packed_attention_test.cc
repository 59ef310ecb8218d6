// PackedAttentionOverRows: one kernel call over every sequence of a paged batch gives each
// sequence the bits of its own AttentionOverRows call, with chunks of several queries too.
#include <gtest/gtest.h>

#include "model/ops.h"

namespace lockstep {
namespace {

TEST(PackedAttentionTest, EqualsOneCallPerSequenceBitForBit) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  const int64_t heads = 6, kv_heads = 2, dim = 16, cache_rows = 400;
  const torch::Tensor keys = torch::randn({cache_rows, kv_heads, dim});
  const torch::Tensor values = torch::randn({cache_rows, kv_heads, dim});
  // Decode (1 query), a chunk of 5 after 20 cached, a fresh prompt of 9, decode at position 70.
  const std::vector<int64_t> lengths = {1, 5, 9, 1}, firsts = {33, 20, 0, 70};
  std::vector<int64_t> cu_seqlens = {0};
  std::vector<torch::Tensor> rows;
  for (size_t s = 0; s < lengths.size(); ++s) {
    cu_seqlens.push_back(cu_seqlens.back() + lengths[s]);
    rows.push_back(torch::randperm(cache_rows, torch::kInt64).narrow(0, 0, firsts[s] + lengths[s])
                       .contiguous());
  }
  const torch::Tensor q = torch::randn({cu_seqlens.back(), heads, dim});
  for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    const torch::Tensor packed =
        ops::PackedAttentionOverRows(q, keys, values, rows, firsts, cu_seqlens, mode);
    ASSERT_EQ(packed.sizes(), q.sizes());
    for (size_t s = 0; s < lengths.size(); ++s) {
      const torch::Tensor alone = ops::AttentionOverRows(q.narrow(0, cu_seqlens[s], lengths[s]),
                                                         keys, values, rows[s], firsts[s], mode);
      const torch::Tensor mine = packed.narrow(0, cu_seqlens[s], lengths[s]).contiguous();
      EXPECT_TRUE(torch::equal(mine.view(torch::kInt32), alone.contiguous().view(torch::kInt32)))
          << "sequence " << s << ", max diff " << (mine - alone).abs().max().item<float>();
    }
  }
}

TEST(PackedAttentionTest, GraphsKeepThePerSequencePath) {
  torch::manual_seed(8);
  const torch::Tensor keys = torch::randn({40, 1, 8}), values = torch::randn({40, 1, 8});
  const torch::Tensor q = torch::randn({3, 2, 8}).requires_grad_();
  const std::vector<torch::Tensor> rows = {torch::arange(2, torch::kInt64),
                                           torch::arange(10, 12, torch::kInt64)};
  const torch::Tensor out = ops::PackedAttentionOverRows(q, keys, values, rows, {0, 1}, {0, 2, 3},
                                                         NumericMode::kBatchInvariant);
  ASSERT_TRUE(out.requires_grad());
  out.sum().backward();
  ASSERT_TRUE(q.grad().defined());
  EXPECT_GT(q.grad().abs().sum().item<float>(), 0);
}

}  // namespace
}  // namespace lockstep
