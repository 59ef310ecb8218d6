// RmsNormRows: accuracy against double, and a row's bits do not depend on the
// row range of the call or the SIMD level.
#include "model/kernels/rms_norm_cpu.h"

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

constexpr double kEps = 1e-6;

// Dims with every tail length class: below one block, exact blocks (a head of
// 64, 128, the hidden sizes 768 and 1024, which the vector levels reduce in
// registers), odd tails.
const int64_t kDims[] = {1, 7, 16, 63, 64, 65, 100, 128, 768, 1024, 2048 + 13};

TEST(RmsNormTest, MatchesDoubleReference) {
  for (int64_t dim : kDims) {
    const int64_t rows = 5;
    const std::vector<float> x =
        RandomFloats(rows * dim, -4.0f, 4.0f, 10 + dim);
    const std::vector<float> w = RandomFloats(dim, 0.5f, 1.5f, 20 + dim);
    std::vector<float> y(rows * dim);
    RmsNormRows(x.data(), w.data(), y.data(), dim, kEps, 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t i = 0; i < dim; ++i)
        sum += double(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(sum / dim + kEps);
      for (int64_t i = 0; i < dim; ++i) {
        const double ref = double(x[r * dim + i]) * inv * w[i];
        ASSERT_NEAR(y[r * dim + i], ref, 1e-6 * std::fabs(ref) + 1e-12)
            << "dim " << dim << " row " << r << " i " << i;
      }
    }
  }
}

TEST(RmsNormTest, RowBitsIndependentOfRowRange) {
  for (int64_t dim : kDims) {
    const int64_t rows = 23;
    const std::vector<float> x =
        RandomFloats(rows * dim, -4.0f, 4.0f, 30 + dim);
    const std::vector<float> w = RandomFloats(dim, 0.5f, 1.5f, 40 + dim);
    std::vector<float> all(rows * dim);
    RmsNormRows(x.data(), w.data(), all.data(), dim, kEps, 0, rows);
    // Each row alone, from a one-row buffer (a different address and batch).
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> one(x.begin() + r * dim, x.begin() + (r + 1) * dim);
      std::vector<float> out(dim);
      RmsNormRows(one.data(), w.data(), out.data(), dim, kEps, 0, 1);
      ASSERT_TRUE(SameBits(out.data(), &all[r * dim], dim))
          << "dim " << dim << " row " << r;
    }
    // Arbitrary splits of the row range.
    std::vector<float> split(rows * dim);
    for (int64_t begin = 0, step = 1; begin < rows;
         begin += step, step = step % 4 + 1) {
      RmsNormRows(x.data(), w.data(), split.data(), dim, kEps, begin,
                  std::min(rows, begin + step));
    }
    EXPECT_TRUE(SameBits(split, all)) << "dim " << dim;
  }
}

TEST(RmsNormTest, EverySimdLevelGivesSameBits) {
  for (int64_t dim : kDims) {
    // Enough rows that a sum reduced in another order would show: one ulp of the
    // sum of squares often rounds away in 1 / sqrt(sum / dim + eps).
    const int64_t rows = 64;
    const std::vector<float> x =
        RandomFloats(rows * dim, -4.0f, 4.0f, 50 + dim);
    const std::vector<float> w = RandomFloats(dim, 0.5f, 1.5f, 60 + dim);
    std::vector<float> reference(rows * dim);
    {
      ScopedSimdLevel level(SimdLevel::kPortable);
      RmsNormRows(x.data(), w.data(), reference.data(), dim, kEps, 0, rows);
    }
    for (SimdLevel level : AvailableSimdLevels()) {
      ScopedSimdLevel scoped(level);
      std::vector<float> y(rows * dim);
      RmsNormRows(x.data(), w.data(), y.data(), dim, kEps, 0, rows);
      EXPECT_TRUE(SameBits(y, reference))
          << "dim " << dim << " level " << int(level);
    }
  }
}

}  // namespace
}  // namespace lockstep::kernels
