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
  torch::Tensor reference = -torch::rand({50}) - 0.5;
  torch::Tensor candidate = reference.clone();
  // Token 27 is sequence 1 (tokens 20..49), position 7.
  candidate[27] = NextUlp(candidate[27].item<float>());
  absl::StatusOr<ParityReport> report = CompareLogProbs(reference, candidate, {0, 20, 50});
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

TEST(ParityCheckerTest, StatisticsMatchTheirFormulas) {
  torch::Tensor reference = torch::tensor({-1.0f, -2.0f, -0.5f, -3.0f});
  torch::Tensor candidate = torch::tensor({-1.1f, -2.0f, -0.3f, -3.0f});
  absl::StatusOr<ParityReport> report = CompareLogProbs(reference, candidate, {0, 4});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->tokens_differing, 2);
  EXPECT_EQ(report->first_difference->second, 0);
  const double d0 = static_cast<double>(-1.1f) - (-1.0f);
  const double d2 = static_cast<double>(-0.3f) - (-0.5f);
  EXPECT_DOUBLE_EQ(report->max_abs_diff, std::abs(d2));
  EXPECT_DOUBLE_EQ(report->mean_diff, (d0 + d2) / 4);
  EXPECT_DOUBLE_EQ(report->mean_abs_diff, (std::abs(d0) + std::abs(d2)) / 4);
  const double k3 = (std::expm1(-d0) + d0 + std::expm1(-d2) + d2) / 4;
  EXPECT_NEAR(report->k3_kl, k3, 1e-12);
  EXPECT_GT(report->k3_kl, 0.0);
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
