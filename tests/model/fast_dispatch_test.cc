// Fast mode's kernel choice: a linear above decode size runs our kernel inside a
// PagedForwardScope (the generator) and stock LibTorch outside it, whatever grad mode says, so a
// trainer's forwards with and without grad agree bit for bit.
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "model/kernels/linear_ops.h"
#include "model/ops.h"
#include "model/packed_batch.h"

namespace lockstep {
namespace {

TEST(FastDispatchTest, PagedForwardScopeTakesTheKernelAtAnySize) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({200, 768});
  const torch::Tensor w = torch::randn({96, 768});
  const torch::Tensor kernel = kernels::FixedOrderLinear(x, w, {});
  const torch::Tensor stock = torch::nn::functional::linear(x, w);
  ASSERT_FALSE(torch::equal(kernel, stock));  // the two differ in some bits, so the check means it
  EXPECT_TRUE(torch::equal(ops::Linear(x, w, {}, NumericMode::kFast), stock));
  {
    ops::PagedForwardScope scope;
    {
      ops::PagedForwardScope nested;
      EXPECT_TRUE(ops::PagedForwardScope::Active());
    }
    EXPECT_TRUE(ops::PagedForwardScope::Active());  // the inner scope restores, not clears
    EXPECT_TRUE(torch::equal(ops::Linear(x, w, {}, NumericMode::kFast), kernel));
  }
  EXPECT_FALSE(ops::PagedForwardScope::Active());
  torch::NoGradGuard no_grad;  // grad mode alone changes nothing
  EXPECT_TRUE(torch::equal(ops::Linear(x, w, {}, NumericMode::kFast), stock));
}

TEST(FastDispatchTest, TrainingForwardsWithAndWithoutGradAgree) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  std::shared_ptr<Transformer> model = CreateRandomModel(config, 11);  // fast mode
  std::vector<std::vector<int64_t>> sequences;
  for (int s = 0; s < 3; ++s) {
    std::vector<int64_t> tokens;
    for (int t = 0; t < 50; ++t) tokens.push_back((s * 37 + t * 11) % config.vocab_size);
    sequences.push_back(tokens);
  }
  absl::StatusOr<PackedBatch> batch = PackSequences(sequences);  // 150 tokens: above decode size
  ASSERT_TRUE(batch.ok());
  absl::StatusOr<torch::Tensor> with_grad = model->Hidden(*batch, TrainingAttention{});
  ASSERT_TRUE(with_grad.ok());
  ASSERT_TRUE(with_grad->requires_grad());
  torch::Tensor without_grad;
  {
    torch::NoGradGuard no_grad;
    absl::StatusOr<torch::Tensor> hidden = model->Hidden(*batch, TrainingAttention{});
    ASSERT_TRUE(hidden.ok());
    without_grad = *hidden;
  }
  EXPECT_TRUE(torch::equal(with_grad->detach(), without_grad));
}

}  // namespace
}  // namespace lockstep
