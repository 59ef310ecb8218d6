#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "model/parity.h"

namespace lockstep {
namespace {

float NextUlp(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 1;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

TEST(ParityCheckerTest, IdenticalTensorsAreBitIdentical) {
  torch::Tensor logprobs = -torch::rand({50});
  absl::StatusOr<ParityReport> report = CompareLogProbs(logprobs, logprobs.clone(), {0, 20, 50});
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->bit_identical());
  EXPECT_EQ(report->tokens_compared, 50);
  EXPECT_FALSE(report->first_difference.has_value());
  EXPECT_EQ(report->max_abs_diff, 0.0);
  EXPECT_EQ(report->k3_kl, 0.0);
}

TEST(ParityCheckerTest, OneUlpChangeIsFoundAtItsPosition) {
  torch::Tensor trainer = -torch::rand({50}) - 0.5;
  torch::Tensor generator = trainer.clone();
  // Token 27 is sequence 1 (tokens 20..49), position 7.
  generator[27] = NextUlp(generator[27].item<float>());
  absl::StatusOr<ParityReport> report = CompareLogProbs(trainer, generator, {0, 20, 50});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->tokens_differing, 1);
  ASSERT_TRUE(report->first_difference.has_value());
  EXPECT_EQ(report->first_difference->first, 1);
  EXPECT_EQ(report->first_difference->second, 7);
  EXPECT_GT(report->max_abs_diff, 0.0);
  EXPECT_LT(report->max_abs_diff, 1e-6);
  EXPECT_NE(report->ToString().find("first difference (sequence 1, position 7)"),
            std::string::npos);
}

// Hand-computed: Δ = trainer − generator = (+0.1, 0, −0.2, 0) (to float rounding);
// k3 = mean(exp(Δ) − 1 − Δ) = ((e^0.1 − 1.1) + (e^−0.2 − 0.8)) / 4 = 0.00597542;
// the reversed direction would read ((e^−0.1 − 0.9) + (e^0.2 − 1.2)) / 4 = 0.00656004.
TEST(ParityCheckerTest, StatisticsMatchHandComputedValues) {
  torch::Tensor trainer = torch::tensor({-1.0f, -2.0f, -0.5f, -3.0f});
  torch::Tensor generator = torch::tensor({-1.1f, -2.0f, -0.3f, -3.0f});
  absl::StatusOr<ParityReport> report = CompareLogProbs(trainer, generator, {0, 2, 4});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->tokens_differing, 2);
  EXPECT_EQ(report->first_difference, std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(report->first_trainer_logprob, -1.0f);
  EXPECT_EQ(report->first_generator_logprob, -1.1f);
  EXPECT_EQ(report->differing_sequences, (std::vector<int64_t>{0, 1}));
  EXPECT_NEAR(report->max_abs_diff, 0.2, 1e-6);
  EXPECT_NEAR(report->mean_diff, (0.1 - 0.2) / 4, 1e-6);
  EXPECT_NEAR(report->mean_abs_diff, (0.1 + 0.2) / 4, 1e-6);
  EXPECT_NEAR(report->k3_kl, 0.00597542, 1e-7);
}

TEST(ParityCheckerTest, AccumulatorInAnyOrderEqualsThePackedComparison) {
  torch::Tensor trainer = -torch::rand({30}) - 0.1;
  torch::Tensor generator = trainer.clone();
  generator[4] = NextUlp(generator[4].item<float>());   // sequence 0, position 4
  generator[25] = NextUlp(generator[25].item<float>());  // sequence 2, position 5
  absl::StatusOr<ParityReport> packed = CompareLogProbs(trainer, generator, {0, 10, 20, 30});
  ASSERT_TRUE(packed.ok());
  // The trainer visits sequences in micro-batch order (here 2, 0, 1).
  ParityAccumulator accumulator;
  for (int64_t s : {2, 0, 1}) {
    for (int64_t p = 0; p < 10; ++p) {
      accumulator.Add(s, p, trainer[s * 10 + p].item<float>(), generator[s * 10 + p].item<float>());
    }
  }
  const ParityReport visited = accumulator.Finish();
  EXPECT_EQ(visited.tokens_compared, 30);
  EXPECT_EQ(visited.tokens_differing, 2);
  EXPECT_EQ(visited.differing_sequences, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(visited.first_difference, std::make_pair(int64_t{2}, int64_t{5}));  // visited first
  EXPECT_EQ(packed->first_difference, std::make_pair(int64_t{0}, int64_t{4}));
  EXPECT_DOUBLE_EQ(visited.max_abs_diff, packed->max_abs_diff);
  EXPECT_NEAR(visited.k3_kl, packed->k3_kl, 1e-18);
}

TEST(ParityCheckerTest, RejectsMismatchedInputs) {
  torch::Tensor a = torch::zeros({4});
  EXPECT_EQ(CompareLogProbs(a, torch::zeros({5}), {0, 4}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareLogProbs(a, a, {0, 3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareLogProbs(a, a.to(torch::kFloat64), {0, 4}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep
