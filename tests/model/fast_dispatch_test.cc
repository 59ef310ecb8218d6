// Fast mode's kernel choice: a linear above decode size runs our kernel in a paged forward (the
// generator's, ForwardKind::kPaged) and stock LibTorch in a training forward, whatever grad mode
// says, so a trainer's forwards with and without grad agree bit for bit.
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "model/kernels/linear_ops.h"
#include "model/ops.h"
#include "model/packed_batch.h"

namespace lockstep {
namespace {

TEST(FastDispatchTest, PagedForwardTakesTheKernelAtAnySize) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({200, 768});
  const torch::Tensor w = torch::randn({96, 768});
  const torch::Tensor kernel = kernels::FixedOrderLinear(x, w, {});
  const torch::Tensor stock = torch::nn::functional::linear(x, w);
  ASSERT_FALSE(torch::equal(kernel, stock));  // the two differ in some bits, so the check means it
  EXPECT_TRUE(
      torch::equal(ops::Linear(x, w, {}, NumericMode::kFast, ForwardKind::kTraining), stock));
  EXPECT_TRUE(
      torch::equal(ops::Linear(x, w, {}, NumericMode::kFast, ForwardKind::kPaged), kernel));
  torch::NoGradGuard no_grad;  // grad mode alone changes nothing
  EXPECT_TRUE(
      torch::equal(ops::Linear(x, w, {}, NumericMode::kFast, ForwardKind::kTraining), stock));
}

// ops::Linears gives each weight what ops::Linear gives it: stock above decode size in a
// training forward in fast mode, the kernel in a paged one and in batch-invariant mode.
TEST(FastDispatchTest, LinearsDispatchAsLinearDoesForEachWeight) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({200, 768});
  const std::vector<torch::Tensor> weights = {torch::randn({96, 768}), torch::randn({48, 768})};
  const std::vector<torch::Tensor> biases = {torch::Tensor(), torch::randn({48})};
  ASSERT_FALSE(torch::equal(kernels::FixedOrderLinear(x, weights[0], {}),
                            torch::nn::functional::linear(x, weights[0])));
  for (const NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    for (const ForwardKind kind : {ForwardKind::kTraining, ForwardKind::kPaged}) {
      for (const int64_t rows : {int64_t{1}, int64_t{200}}) {
        const torch::Tensor rows_of_x = x.narrow(0, 0, rows);
        const std::vector<torch::Tensor> together =
            ops::Linears(rows_of_x, weights, biases, mode, kind);
        ASSERT_EQ(together.size(), 2u);
        for (size_t i = 0; i < 2; ++i) {
          EXPECT_TRUE(
              torch::equal(together[i], ops::Linear(rows_of_x, weights[i], biases[i], mode, kind)))
              << "weight " << i << ", " << rows << " rows, mode " << static_cast<int>(mode)
              << ", kind " << static_cast<int>(kind);
        }
      }
    }
  }
}

// Keeps layer 0's input norm and q_proj outputs.
class QProjInputs : public ForwardObserver {
 public:
  void OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                const std::vector<int64_t>*) override {
    if (layer == 0 && op == Op::kInputNorm) normed = output.detach().clone();
    if (layer == 0 && op == Op::kQProj) q = output.detach().clone();
  }
  torch::Tensor normed, q;
};

// The kind travels from the AttentionContext through the plan to every layer's linears: a
// 150-token prefill over paged attention runs q_proj in the kernel, the same tokens over training
// attention in stock LibTorch.
TEST(FastDispatchTest, TheContextsKindReachesTheLayersLinears) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 1;
  std::shared_ptr<Transformer> model = CreateRandomModel(config, 5);  // fast mode
  std::vector<int64_t> tokens;
  for (int t = 0; t < 150; ++t) tokens.push_back((t * 13) % config.vocab_size);
  torch::NoGradGuard no_grad;
  const AttentionImpl& attention = *model->model->layers[0]->as<DecoderLayerImpl>()->self_attn;
  const torch::Tensor& weight = attention.q_proj->weight;
  const torch::Tensor& bias = attention.q_proj->bias;

  PagedKvCache cache = AllocatePagedKvCache(config, 10, 16, torch::kFloat32);
  PagedAttention paged{&cache, ContiguousBlockTables(1, 10)};
  QProjInputs in_paged;
  ASSERT_TRUE(model->Hidden(*PackContinuations({tokens}, {0}), paged, &in_paged).ok());
  EXPECT_TRUE(torch::equal(in_paged.q, kernels::FixedOrderLinear(in_paged.normed, weight, bias)));

  QProjInputs in_training;
  ASSERT_TRUE(model->Hidden(*PackSequences({tokens}), TrainingAttention{}, &in_training).ok());
  const torch::Tensor stock = torch::nn::functional::linear(in_training.normed, weight, bias);
  EXPECT_TRUE(torch::equal(in_training.q, stock));
  ASSERT_TRUE(torch::equal(in_paged.normed, in_training.normed));  // same input to q_proj,
  EXPECT_FALSE(torch::equal(in_paged.q, in_training.q));           // different bits out of it
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
