// Each loss against values computed by hand on a few tokens.
#include "trainer/losses.h"

#include <cmath>

#include "gtest/gtest.h"

namespace lockstep::trainer {
namespace {

torch::Tensor F(std::vector<float> values) { return torch::tensor(values, torch::kFloat32); }
torch::Tensor AllTrue(int64_t n) { return torch::ones({n}, torch::kBool); }

PolicyLossInput Input(torch::Tensor logp, torch::Tensor behaviour, torch::Tensor advantages,
                      std::vector<int64_t> cu_seqlens) {
  PolicyLossInput in;
  in.logprobs = logp.requires_grad_(true);
  in.behaviour_logprobs = behaviour;
  in.advantages = advantages;
  in.mask = AllTrue(logp.size(0));
  in.cu_seqlens = std::move(cu_seqlens);
  in.weights = AggregationWeights(Aggregation::kTokenMean, in.mask, in.cu_seqlens,
                                  static_cast<double>(logp.size(0)), 1, 1);
  return in;
}

TEST(LossesTest, ClippedSurrogateWithAsymmetricEpsilons) {
  // log-ratios d = {0.5, -0.5, 0.1, 0}, A = {1, -1, 1, -1}, eps_low 0.2, eps_high 0.28.
  PolicyLossInput in = Input(F({0.5, -0.5, 0.1, 0}), F({0, 0, 0, 0}), F({1, -1, 1, -1}), {0, 4});
  PolicyLossOptions options;
  options.clip_eps_low = 0.2;
  options.clip_eps_high = 0.28;
  PolicyLossResult r = PolicyLoss(in, options);
  // t0: r = e^0.5 > 1.28, A > 0 -> -1.28 (clipped);   t1: r = e^-0.5 < 0.8, A < 0 -> 0.8 (clipped)
  // t2: r = e^0.1 inside -> -e^0.1;                    t3: r = 1, A = -1 -> 1
  const double expected = (-1.28 + 0.8 - std::exp(0.1) + 1.0) / 4;
  EXPECT_NEAR(r.loss.item<double>(), expected, 1e-6);
  EXPECT_TRUE(r.clipped[0].item<bool>());
  EXPECT_TRUE(r.clipped[1].item<bool>());
  EXPECT_FALSE(r.clipped[2].item<bool>());
  EXPECT_FALSE(r.clipped[3].item<bool>());
  EXPECT_NEAR(r.ratio[0].item<double>(), std::exp(0.5), 1e-6);
  r.loss.backward();
  // Clipped tokens get no gradient; others -A * r / N.
  torch::Tensor g = in.logprobs.grad();
  EXPECT_EQ(g[0].item<float>(), 0.0f);
  EXPECT_EQ(g[1].item<float>(), 0.0f);
  EXPECT_NEAR(g[2].item<double>(), -std::exp(0.1) / 4, 1e-6);
  EXPECT_NEAR(g[3].item<double>(), 1.0 / 4, 1e-6);
}

TEST(LossesTest, NonFiniteBehaviourTokensAreMaskedWithoutNan) {
  PolicyLossInput in = Input(F({-1, -2}), F({-1, NAN}), F({1, 1}), {0, 2});
  in.mask = torch::tensor({true, false});
  in.weights = AggregationWeights(Aggregation::kTokenMean, in.mask, in.cu_seqlens, 1, 1, 1);
  PolicyLossResult r = PolicyLoss(in, PolicyLossOptions{});
  EXPECT_NEAR(r.loss.item<double>(), -1.0, 1e-6);  // ratio 1, A = 1, one token
  r.loss.backward();
  EXPECT_TRUE(torch::isfinite(in.logprobs.grad()).all().item<bool>());
  EXPECT_EQ(in.logprobs.grad()[1].item<float>(), 0.0f);
  EXPECT_NEAR(in.logprobs.grad()[0].item<double>(), -1.0, 1e-6);
}

TEST(LossesTest, LogRatioIsClamped) {
  // d = 30 clamped to 20; A < 0 picks the unclipped branch: l = e^20 (not e^30).
  PolicyLossInput in = Input(F({0}), F({-30}), F({-1}), {0, 1});
  PolicyLossOptions options;
  options.log_ratio_clamp = 20;
  PolicyLossResult r = PolicyLoss(in, options);
  EXPECT_NEAR(r.loss.item<double>() / std::exp(20.0), 1.0, 1e-5);
}

TEST(LossesTest, GspoUsesTheSequenceGeometricMeanRatio) {
  // Sequence 0: d = {0.2, 0.4} -> s = e^0.3 = 1.35 > 1.2 with A = 1 -> clipped, l = -1.2 per token.
  // Sequence 1: d = {-0.1}     -> s = e^-0.1, A = 2 -> l = -2 e^-0.1.
  PolicyLossInput in = Input(F({0.2, 0.4, -0.1}), F({0, 0, 0}), F({1, 1, 2}), {0, 2, 3});
  in.weights = AggregationWeights(Aggregation::kSeqMeanTokenMean, in.mask, in.cu_seqlens, 3, 2, 1);
  PolicyLossOptions options;
  options.kind = LossKind::kGspo;
  PolicyLossResult r = PolicyLoss(in, options);
  // seq-mean-token-mean: (1/2) * [(-1.2 - 1.2) / 2 + (-2 e^-0.1)]
  const double expected = 0.5 * (-1.2 + -2 * std::exp(-0.1));
  EXPECT_NEAR(r.loss.item<double>(), expected, 1e-6);
  r.loss.backward();
  torch::Tensor g = in.logprobs.grad();
  EXPECT_EQ(g[0].item<float>(), 0.0f);
  EXPECT_EQ(g[1].item<float>(), 0.0f);
  // d l / d logp = -A s (1 / n_seq) * w = -2 e^-0.1 * 1 * 0.5
  EXPECT_NEAR(g[2].item<double>(), -std::exp(-0.1), 1e-6);
}

TEST(LossesTest, TruncatedImportanceSamplingWeightsTheOnPolicyGradient) {
  // pi/pi_b = {e^0.5, e^-1}, cap 1.2 -> weights {1.2, e^-1}; surrogate ratio is 1.
  PolicyLossInput in = Input(F({0.5, -1}), F({0, 0}), F({1, 1}), {0, 2});
  PolicyLossOptions options;
  options.tis_cap = 1.2;
  PolicyLossResult r = PolicyLoss(in, options);
  EXPECT_NEAR(r.loss.item<double>(), -(1.2 + std::exp(-1.0)) / 2, 1e-6);
  r.loss.backward();
  EXPECT_NEAR(in.logprobs.grad()[0].item<double>(), -0.6, 1e-6);
  EXPECT_NEAR(in.logprobs.grad()[1].item<double>(), -std::exp(-1.0) / 2, 1e-6);
}

TEST(LossesTest, K3KlToTheReference) {
  // e = ref - logp = {0.3, -0.2}; A = 0 so only the KL term remains.
  PolicyLossInput in = Input(F({-1, -1}), F({-1, -1}), F({0, 0}), {0, 2});
  in.reference_logprobs = F({-0.7, -1.2});
  PolicyLossOptions options;
  options.kl_coef = 0.1;
  PolicyLossResult r = PolicyLoss(in, options);
  auto k3 = [](double e) { return std::exp(e) - 1 - e; };
  EXPECT_NEAR(r.loss.item<double>(), 0.1 * (k3(0.3) + k3(-0.2)) / 2, 1e-7);
  EXPECT_NEAR(r.kl[0].item<double>(), k3(0.3), 1e-6);
  r.loss.backward();
  // d k3 / d logp = 1 - e^e
  EXPECT_NEAR(in.logprobs.grad()[0].item<double>(), 0.1 * (1 - std::exp(0.3)) / 2, 1e-6);
}

TEST(LossesTest, AggregationWeights) {
  torch::Tensor mask = torch::tensor({true, true, false, true, true, true});
  const std::vector<int64_t> cu = {0, 3, 6};  // loss tokens: 2 in sequence 0, 3 in sequence 1
  torch::Tensor token = AggregationWeights(Aggregation::kTokenMean, mask, cu, 10, 4, 1);
  EXPECT_NEAR(token[0].item<double>(), 0.1, 1e-7);
  EXPECT_EQ(token[2].item<float>(), 0.0f);
  torch::Tensor seq = AggregationWeights(Aggregation::kSeqMeanTokenMean, mask, cu, 10, 4, 1);
  EXPECT_NEAR(seq[0].item<double>(), 1.0 / (2 * 4), 1e-7);
  EXPECT_NEAR(seq[5].item<double>(), 1.0 / (3 * 4), 1e-7);
  torch::Tensor constant = AggregationWeights(Aggregation::kConstant, mask, cu, 10, 4, 16);
  EXPECT_NEAR(constant[4].item<double>(), 1.0 / (16 * 4), 1e-7);
  EXPECT_EQ(constant[2].item<float>(), 0.0f);
}

TEST(LossesTest, SftLossIsWeightedNegativeLogLikelihood) {
  torch::Tensor logp = F({-1, -3}).requires_grad_(true);
  torch::Tensor loss = SftLoss(logp, F({0.5, 0.5}));
  EXPECT_NEAR(loss.item<double>(), 2.0, 1e-6);
}

}  // namespace
}  // namespace lockstep::trainer
