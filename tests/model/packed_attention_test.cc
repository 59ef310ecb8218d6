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

// With a graph the packed call is one node; its gradients are those of one call per sequence.
TEST(PackedAttentionTest, GraphsGetThePerSequenceGradients) {
  torch::manual_seed(8);
  const std::vector<torch::Tensor> rows = {torch::arange(2, torch::kInt64),
                                           torch::arange(10, 12, torch::kInt64),
                                           torch::randperm(40, torch::kInt64).narrow(0, 0, 9)};
  const std::vector<int64_t> firsts = {0, 1, 5}, cu_seqlens = {0, 2, 3, 7};
  const torch::Tensor q0 = torch::randn({7, 2, 8}), keys0 = torch::randn({40, 1, 8});
  const torch::Tensor values0 = torch::randn({40, 1, 8}), grad_out = torch::randn({7, 2, 8});
  for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    std::vector<torch::Tensor> grads[2];  // [packed, per sequence]: q, keys, values
    for (int per_sequence : {0, 1}) {
      torch::Tensor q = q0.clone().requires_grad_();
      torch::Tensor keys = keys0.clone().requires_grad_();
      torch::Tensor values = values0.clone().requires_grad_();
      torch::Tensor out;
      if (per_sequence) {
        std::vector<torch::Tensor> outputs;
        for (size_t s = 0; s < rows.size(); ++s) {
          outputs.push_back(ops::AttentionOverRows(
              q.narrow(0, cu_seqlens[s], cu_seqlens[s + 1] - cu_seqlens[s]), keys, values,
              rows[s], firsts[s], NumericMode::kBatchInvariant));
        }
        out = torch::cat(outputs, 0);
      } else {
        out = ops::PackedAttentionOverRows(q, keys, values, rows, firsts, cu_seqlens, mode);
      }
      ASSERT_TRUE(out.requires_grad());
      out.backward(grad_out);
      grads[per_sequence] = {q.grad(), keys.grad(), values.grad()};
    }
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(grads[0][i].defined()) << i;
      EXPECT_GT(grads[0][i].abs().sum().item<float>(), 0) << i;
      EXPECT_TRUE(torch::allclose(grads[0][i], grads[1][i], 1e-5, 1e-6)) << i;
    }
  }
}

}  // namespace
// The packed call checks every sequence's key rows once, for both devices: int64, one per
// position up to the sequence's last query.
TEST(PackedAttentionTest, RejectsKeyRowsThatDoNotFitTheirSequence) {
  torch::NoGradGuard no_grad;
  const torch::Tensor keys = torch::randn({40, 2, 16}), values = torch::randn({40, 2, 16});
  const torch::Tensor q = torch::randn({3, 4, 16});  // sequences of 1 and 2 queries
  const std::vector<int64_t> cu_seqlens = {0, 1, 3}, firsts = {5, 0};
  const torch::Tensor fits0 = torch::arange(6, torch::kInt64);
  const torch::Tensor fits1 = torch::arange(10, 12, torch::kInt64);
  EXPECT_NO_THROW(ops::PackedAttentionOverRows(q, keys, values, {fits0, fits1}, firsts,
                                               cu_seqlens, NumericMode::kBatchInvariant));
  for (const torch::Tensor& bad :
       {torch::arange(11, torch::kInt64).narrow(0, 10, 1), torch::arange(10, 13, torch::kInt64),
        torch::arange(10, 12, torch::kInt32)}) {
    for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
      EXPECT_THROW(ops::PackedAttentionOverRows(q, keys, values, {fits0, bad}, firsts, cu_seqlens,
                                                mode),
                   c10::Error)
          << bad.sizes() << " " << bad.scalar_type();
    }
  }
}

}  // namespace lockstep
