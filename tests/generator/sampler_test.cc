#include "generator/sampler.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "model/ops.h"

namespace lockstep::generator {
namespace {

torch::Tensor RandomLogits(int64_t vocab, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn({vocab}, generator) * 3.0;
}

Sequence MakeSequence(const SamplingParams& params, uint64_t seed, int64_t sample_index = 0) {
  return Sequence(0, sample_index, {1, 2, 3}, params, seed);
}

constexpr NumericMode kModes[] = {NumericMode::kFast, NumericMode::kBatchInvariant};

uint32_t FloatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

TEST(SamplerTest, GreedyIsArgmaxWithTemperatureOneLogprob) {
  for (NumericMode mode : kModes) {
    for (uint64_t s = 0; s < 10; ++s) {
      torch::Tensor logits = RandomLogits(300, s);
      SamplingParams params;
      params.temperature = 0.0;
      Sequence seq = MakeSequence(params, s);
      SampledToken t = SampleToken(logits, seq, mode);
      EXPECT_EQ(t.token, logits.argmax().item<int64_t>());
      const float expected =
          ops::LogSoftmax(logits.unsqueeze(0), 1.0, mode)[0][t.token].item<float>();
      EXPECT_EQ(t.logprob, expected);
    }
  }
}

TEST(SamplerTest, TopKOneAndTinyTopPAreGreedy) {
  for (uint64_t s = 0; s < 20; ++s) {
    torch::Tensor logits = RandomLogits(300, s);
    const int64_t argmax = logits.argmax().item<int64_t>();
    SamplingParams top_k;
    top_k.temperature = 1.3;
    top_k.top_k = 1;
    Sequence a = MakeSequence(top_k, s);
    EXPECT_EQ(SampleToken(logits, a, NumericMode::kBatchInvariant).token, argmax);
    SamplingParams top_p;
    top_p.temperature = 0.7;
    top_p.top_p = 1e-6;
    Sequence b = MakeSequence(top_p, s);
    EXPECT_EQ(SampleToken(logits, b, NumericMode::kBatchInvariant).token, argmax);
  }
}

TEST(SamplerTest, LogprobIsTemperatureScaledFullDistribution) {
  torch::Tensor logits = RandomLogits(300, 3);
  SamplingParams params;
  params.temperature = 0.6;
  params.top_k = 5;
  Sequence seq = MakeSequence(params, 9);
  SampledToken t = SampleToken(logits, seq, NumericMode::kBatchInvariant);
  const float expected =
      ops::LogSoftmax(logits.unsqueeze(0), 0.6, NumericMode::kBatchInvariant)[0][t.token]
          .item<float>();
  EXPECT_EQ(t.logprob, expected);
  // top-k restricts the draw to the 5 largest logits.
  EXPECT_LT((logits > logits[t.token]).sum().item<int64_t>(), 5);
}

TEST(SamplerTest, SameSeedAndSampleIndexGiveSameTokens) {
  SamplingParams params;
  params.temperature = 1.0;
  auto draw = [&](uint64_t seed, int64_t index) {
    Sequence seq = MakeSequence(params, seed, index);
    std::vector<int64_t> tokens;
    for (uint64_t step = 0; step < 50; ++step) {
      tokens.push_back(SampleToken(RandomLogits(64, step), seq, NumericMode::kFast).token);
    }
    return tokens;
  };
  EXPECT_EQ(draw(7, 0), draw(7, 0));
  EXPECT_NE(draw(7, 0), draw(8, 0));
  EXPECT_NE(draw(7, 0), draw(7, 1));
}

TEST(SamplerTest, ABatchOfPicksGivesEachPickItsOneRowResult) {
  // Five rows, seven picks: greedy and two temperatures (one with top-k), two picks sharing a
  // row (the samples of one prompt). Each pick's token and log-prob bits must be those of a
  // one-row SampleToken on its own row with a fresh sequence of the same seed.
  const int64_t vocab = 333;
  torch::Tensor logits = torch::stack({RandomLogits(vocab, 1), RandomLogits(vocab, 2),
                                       RandomLogits(vocab, 3), RandomLogits(vocab, 4),
                                       RandomLogits(vocab, 5)});
  SamplingParams greedy, warm, cool;
  greedy.temperature = 0.0;
  warm.temperature = 1.2;
  cool.temperature = 0.5;
  cool.top_k = 7;
  const std::vector<std::pair<int64_t, SamplingParams>> spec = {
      {0, greedy}, {1, warm}, {1, warm}, {2, cool}, {3, greedy}, {4, warm}, {2, greedy}};
  for (NumericMode mode : kModes) {
    std::vector<Sequence> batch, alone;
    for (size_t i = 0; i < spec.size(); ++i) {
      batch.push_back(MakeSequence(spec[i].second, 40 + i, i));
      alone.push_back(MakeSequence(spec[i].second, 40 + i, i));
    }
    std::vector<SamplingPick> picks;
    for (size_t i = 0; i < spec.size(); ++i) picks.push_back({spec[i].first, &batch[i]});
    const std::vector<SampledToken> got = SampleTokens(logits, picks, mode);
    ASSERT_EQ(got.size(), spec.size());
    for (size_t i = 0; i < spec.size(); ++i) {
      const SampledToken want = SampleToken(logits[spec[i].first], alone[i], mode);
      EXPECT_EQ(got[i].token, want.token) << "pick " << i;
      EXPECT_EQ(FloatBits(got[i].logprob), FloatBits(want.logprob)) << "pick " << i;
    }
    EXPECT_EQ(got[0].token, logits[0].argmax().item<int64_t>());
    EXPECT_EQ(got[4].token, logits[3].argmax().item<int64_t>());
  }
}

TEST(SamplerTest, SamplesFollowTheDistribution) {
  // Two tokens with probabilities 0.25 / 0.75 (others negligible): frequency within 3 sigma.
  torch::Tensor logits = torch::full({8}, -100.0);
  logits[2] = 0.0;
  logits[5] = std::log(3.0);
  SamplingParams params;
  Sequence seq = MakeSequence(params, 123);
  int64_t count5 = 0;
  const int64_t draws = 4000;
  for (int64_t i = 0; i < draws; ++i)
    count5 += SampleToken(logits, seq, NumericMode::kFast).token == 5;
  EXPECT_NEAR(static_cast<double>(count5) / draws, 0.75, 3 * std::sqrt(0.75 * 0.25 / draws));
}

}  // namespace
}  // namespace lockstep::generator
