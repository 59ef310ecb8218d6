// TargetLogProbsRows / LogSoftmaxRows: accuracy against double, the gathered
// value equals the full row's value bit for bit, and a row's bits do not depend
// on the row range or SIMD level.
#include "model/kernels/log_softmax_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/bit_test_util.h"

namespace lockstep::kernels {
namespace {

using testing::AvailableSimdLevels;
using testing::RandomFloats;
using testing::SameBits;
using testing::ScopedSimdLevel;

const int64_t kVocabs[] = {1, 5, 64, 65, 1000, 32000 + 7};
const float kTemperatures[] = {1.0f, 0.7f, 1.3f};

std::vector<int64_t> Targets(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> t(rows);
  for (int64_t& x : t) x = static_cast<int64_t>(rng() % vocab);
  return t;
}

TEST(LogSoftmaxTest, MatchesDoubleReference) {
  for (int64_t vocab : kVocabs) {
    for (float temperature : kTemperatures) {
      const int64_t rows = 3;
      const std::vector<float> logits =
          RandomFloats(rows * vocab, -15.0f, 25.0f, 7 + vocab);
      std::vector<float> out(rows * vocab);
      LogSoftmaxRows(logits.data(), out.data(), vocab, temperature, 0, rows);
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = &logits[r * vocab];
        double m = -INFINITY;
        for (int64_t j = 0; j < vocab; ++j)
          m = std::max(m, double(x[j]) / temperature);
        double sum = 0;
        for (int64_t j = 0; j < vocab; ++j)
          sum += std::exp(double(x[j]) / temperature - m);
        const double log_sum = std::log(sum);
        for (int64_t j = 0; j < vocab; ++j) {
          const double ref = double(x[j]) / temperature - m - log_sum;
          // fp32 logits / T carry 0.5 ulp of |s|, the rest is a few ulp of
          // log_sum.
          const double tol =
              1e-6 * (std::fabs(ref) + std::fabs(m) + log_sum) + 1e-7;
          ASSERT_NEAR(out[r * vocab + j], ref, tol)
              << "vocab " << vocab << " T " << temperature;
        }
      }
    }
  }
}

TEST(LogSoftmaxTest, TargetLogProbsEqualFullRowBits) {
  for (int64_t vocab : kVocabs) {
    for (float temperature : kTemperatures) {
      const int64_t rows = 4;
      const std::vector<float> logits =
          RandomFloats(rows * vocab, -10.0f, 10.0f, 9 + vocab);
      std::vector<float> full(rows * vocab);
      LogSoftmaxRows(logits.data(), full.data(), vocab, temperature, 0, rows);
      // Every target of every row (in rounds of one target per row), plus a
      // sample when large.
      const int64_t rounds = std::min<int64_t>(vocab, 200);
      for (int64_t k = 0; k < rounds; ++k) {
        std::vector<int64_t> targets(rows);
        for (int64_t r = 0; r < rows; ++r)
          targets[r] = (k * 7919 + r * 31) % vocab;
        if (k < vocab && vocab <= 200) targets[0] = k;
        std::vector<float> gathered(rows);
        TargetLogProbsRows(logits.data(), targets.data(), gathered.data(),
                           vocab, temperature, 0, rows);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_TRUE(SameBits(&gathered[r], &full[r * vocab + targets[r]], 1))
              << "vocab " << vocab << " T " << temperature << " row " << r;
        }
      }
    }
  }
}

TEST(LogSoftmaxTest, RowBitsIndependentOfRowRange) {
  for (int64_t vocab : kVocabs) {
    const int64_t rows = 13;
    const float temperature = 0.8f;
    const std::vector<float> logits =
        RandomFloats(rows * vocab, -10.0f, 10.0f, 11 + vocab);
    const std::vector<int64_t> targets = Targets(rows, vocab, 12);
    std::vector<float> all(rows);
    TargetLogProbsRows(logits.data(), targets.data(), all.data(), vocab,
                       temperature, 0, rows);
    std::vector<float> all_full(rows * vocab);
    LogSoftmaxRows(logits.data(), all_full.data(), vocab, temperature, 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(logits.begin() + r * vocab,
                             logits.begin() + (r + 1) * vocab);
      float alone;
      TargetLogProbsRows(row.data(), &targets[r], &alone, vocab, temperature, 0,
                         1);
      ASSERT_TRUE(SameBits(&alone, &all[r], 1))
          << "vocab " << vocab << " row " << r;
      std::vector<float> full(vocab);
      LogSoftmaxRows(row.data(), full.data(), vocab, temperature, 0, 1);
      ASSERT_TRUE(SameBits(full.data(), &all_full[r * vocab], vocab))
          << "row " << r;
    }
    std::vector<float> split(rows);
    for (int64_t begin = 0, step = 2; begin < rows;
         begin += step, step = step % 3 + 1) {
      TargetLogProbsRows(logits.data(), targets.data(), split.data(), vocab,
                         temperature, begin, std::min(rows, begin + step));
    }
    EXPECT_TRUE(SameBits(split, all)) << "vocab " << vocab;
  }
}

TEST(LogSoftmaxTest, EverySimdLevelGivesSameBits) {
  for (int64_t vocab : kVocabs) {
    for (float temperature : kTemperatures) {
      const int64_t rows = 3;
      const std::vector<float> logits =
          RandomFloats(rows * vocab, -30.0f, 30.0f, 13 + vocab);
      const std::vector<int64_t> targets = Targets(rows, vocab, 14);
      std::vector<float> ref_full(rows * vocab), ref_target(rows);
      {
        ScopedSimdLevel level(SimdLevel::kPortable);
        LogSoftmaxRows(logits.data(), ref_full.data(), vocab, temperature, 0,
                       rows);
        TargetLogProbsRows(logits.data(), targets.data(), ref_target.data(),
                           vocab, temperature, 0, rows);
      }
      for (SimdLevel level : AvailableSimdLevels()) {
        ScopedSimdLevel scoped(level);
        std::vector<float> full(rows * vocab), target(rows);
        LogSoftmaxRows(logits.data(), full.data(), vocab, temperature, 0, rows);
        TargetLogProbsRows(logits.data(), targets.data(), target.data(), vocab,
                           temperature, 0, rows);
        EXPECT_TRUE(SameBits(full, ref_full))
            << "vocab " << vocab << " level " << int(level);
        EXPECT_TRUE(SameBits(target, ref_target))
            << "vocab " << vocab << " level " << int(level);
      }
    }
  }
}

TEST(LogSoftmaxTest, TargetOutOfRangeGivesNaN) {
  const std::vector<float> logits = RandomFloats(2 * 10, -1.0f, 1.0f, 15);
  const int64_t targets[] = {-100, 10};
  float out[2];
  TargetLogProbsRows(logits.data(), targets, out, 10, 1.0f, 0, 2);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
}

}  // namespace
}  // namespace lockstep::kernels
