// AdamW, clipping, the LR schedule and micro-batch packing against hand-computed values.
#include "trainer/optimizer.h"

#include <cmath>

#include "gtest/gtest.h"
#include "trainer/lr_schedule.h"
#include "trainer/micro_batches.h"

namespace lockstep::trainer {
namespace {

TEST(AdamWTest, TwoStepsMatchTheFormula) {
  torch::Tensor matrix = torch::tensor({{1.0f, -2.0f}}).requires_grad_(true);
  torch::Tensor vector = torch::tensor({0.5f}).requires_grad_(true);
  AdamWOptions options;
  options.weight_decay = 0.1;
  options.eps = 1e-8;
  AdamW adam({{"m", matrix}, {"v", vector}}, options);
  const double lr = 0.01, b1 = 0.9, b2 = 0.999;
  // Step 1: m_hat = g, v_hat = g^2 -> update lr * g / (|g| + eps).
  matrix.mutable_grad() = torch::tensor({{0.3f, -0.4f}});
  vector.mutable_grad() = torch::tensor({2.0f});
  adam.Step(lr);
  double p0 = 1.0 * (1 - lr * 0.1) - lr * 0.3 / (0.3 + 1e-8);
  double p1 = -2.0 * (1 - lr * 0.1) + lr * 0.4 / (0.4 + 1e-8);
  double q = 0.5 - lr * 2.0 / (2.0 + 1e-8);  // 1-D: no weight decay
  EXPECT_NEAR(matrix[0][0].item<double>(), p0, 1e-6);
  EXPECT_NEAR(matrix[0][1].item<double>(), p1, 1e-6);
  EXPECT_NEAR(vector[0].item<double>(), q, 1e-6);
  // Step 2 with g' = 0.1 on matrix[0][0].
  matrix.mutable_grad() = torch::tensor({{0.1f, 0.0f}});
  vector.mutable_grad() = torch::Tensor();  // no gradient: not updated
  adam.Step(lr);
  const double m = b1 * (1 - b1) * 0.3 + (1 - b1) * 0.1;
  const double v = b2 * (1 - b2) * 0.09 + (1 - b2) * 0.01;
  const double m_hat = m / (1 - b1 * b1), v_hat = v / (1 - b2 * b2);
  p0 = p0 * (1 - lr * 0.1) - lr * m_hat / (std::sqrt(v_hat) + 1e-8);
  EXPECT_NEAR(matrix[0][0].item<double>(), p0, 1e-6);
  EXPECT_NEAR(vector[0].item<double>(), q, 1e-7);
  EXPECT_EQ(adam.step_count(), 2);
}

TEST(AdamWTest, StateDictRoundTripsAndRejectsBadState) {
  torch::Tensor p = torch::ones({2, 2}).requires_grad_(true);
  AdamW adam({{"w", p}}, {});
  p.mutable_grad() = torch::full({2, 2}, 0.5f);
  adam.Step(0.1);
  TensorMap state = adam.StateDict();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state.at("step").item<int64_t>(), 1);
  torch::Tensor q = torch::ones({2, 2}).requires_grad_(true);
  AdamW restored({{"w", q}}, {});
  TensorMap copy;
  for (const auto& [k, v] : state) copy[k] = v.clone();
  ASSERT_TRUE(restored.LoadStateDict(copy).ok());
  EXPECT_TRUE(torch::equal(restored.StateDict().at("exp_avg.w"), state.at("exp_avg.w")));
  EXPECT_EQ(restored.step_count(), 1);
  copy.erase("exp_avg_sq.w");
  absl::Status missing = restored.LoadStateDict(copy);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("exp_avg_sq.w"), std::string::npos);
  copy["exp_avg_sq.w"] = torch::zeros({3});
  EXPECT_FALSE(restored.LoadStateDict(copy).ok());
}

TEST(ClipGradNormTest, ScalesToTheMaximumAndReturnsTheNormBefore) {
  torch::Tensor a = torch::zeros({1}).requires_grad_(true);
  torch::Tensor b = torch::zeros({1}).requires_grad_(true);
  a.mutable_grad() = torch::tensor({3.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  EXPECT_DOUBLE_EQ(ClipGradNorm({a, b}, 1.0), 5.0);
  EXPECT_NEAR(a.grad()[0].item<double>(), 3.0 / (5.0 + 1e-6), 1e-6);
  EXPECT_NEAR(b.grad()[0].item<double>(), 4.0 / (5.0 + 1e-6), 1e-6);
  // Under the maximum: untouched.
  EXPECT_NEAR(ClipGradNorm({a, b}, 10.0), 1.0, 1e-6);
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.6, 1e-6);
}

TEST(LrScheduleTest, WarmupThenCosineToTheFloor) {
  TrainerOptions o;
  o.lr = 1.0;
  o.warmup_steps = 2;
  o.total_steps = 10;
  o.schedule = ScheduleKind::kCosine;
  o.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 0), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 1), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 2), 1.0);
  EXPECT_NEAR(LearningRateAt(o, 6), 0.1 + 0.9 * 0.5, 1e-12);  // half way
  EXPECT_NEAR(LearningRateAt(o, 10), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(o, 50), 0.1, 1e-12);
  o.schedule = ScheduleKind::kConstant;
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 0), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 7), 1.0);
}

TEST(MicroBatchesTest, PacksInOrderByTokenBudget) {
  using Batches = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(PackMicroBatches({3, 3, 3, 10, 2}, 6), Batches({{0, 1}, {2}, {3}, {4}}));
  EXPECT_EQ(PackMicroBatches({1, 2, 3}, 100), Batches({{0, 1, 2}}));
  EXPECT_EQ(PackMicroBatches({1, 2, 3}, 0), Batches({{0, 1, 2}}));
  EXPECT_TRUE(PackMicroBatches({}, 8).empty());
}

}  // namespace
}  // namespace lockstep::trainer
