// DeterministicExp: accuracy against double exp, and the AVX2 / AVX-512
// versions give the scalar version's bits lane by lane.
#include "model/kernels/deterministic_math_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/kernels/bit_test_util.h"

namespace lockstep::kernels {
namespace {

using testing::Bits;
using testing::SameBits;

LOCKSTEP_TARGET_AVX2 void ExpArrayAvx2(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, ExpAvx2(_mm256_loadu_ps(x + i)));
}

LOCKSTEP_TARGET_AVX512 void ExpArrayAvx512(const float* x, float* y,
                                           int64_t n) {
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, ExpAvx512(_mm512_loadu_ps(x + i)));
  }
}

// Inputs: a bit-pattern sweep over [-110, 90] plus special values; size a
// multiple of 16.
std::vector<float> SweepInputs() {
  std::vector<float> xs;
  const float lo = -110.0f, hi = 90.0f;
  for (uint32_t b = 0; b < 0x80000000u; b += 263) {  // non-negative floats
    float x;
    std::memcpy(&x, &b, sizeof(x));
    if (x > 110.0f) break;
    if (x <= hi) xs.push_back(x);
    if (-x >= lo) xs.push_back(-x);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x :
       {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
        88.7228f, 88.72284f, -87.33655f, -103.27893f, -103.97208f, 1000.0f,
        -1000.0f, std::numeric_limits<float>::max(),
        std::numeric_limits<float>::lowest(),
        std::numeric_limits<float>::denorm_min()}) {
    xs.push_back(x);
  }
  while (xs.size() % 16 != 0) xs.push_back(1.0f);
  return xs;
}

TEST(DeterministicExpTest, WithinTwoUlpOfDoubleExp) {
  const std::vector<float> xs = SweepInputs();
  double worst_ulp = 0;
  float worst_x = 0;
  for (float x : xs) {
    if (std::isnan(x)) continue;
    const float y = DeterministicExp(x);
    const double ref = std::exp(static_cast<double>(x));
    const float ref_f = static_cast<float>(ref);
    if (std::isinf(ref_f)) {
      ASSERT_TRUE(std::isinf(y) || y == std::numeric_limits<float>::max()) << x;
      continue;
    }
    // Error in units of the float spacing at the reference (the subnormal
    // spacing below 2^-126).
    const double ulp =
        std::max(std::ldexp(1.0, std::ilogb(std::max(ref, 1e-45)) - 23),
                 std::ldexp(1.0, -149));
    const double err = std::fabs(static_cast<double>(y) - ref) / ulp;
    if (err > worst_ulp) {
      worst_ulp = err;
      worst_x = x;
    }
  }
  RecordProperty("worst_ulp", std::to_string(worst_ulp));
  EXPECT_LE(worst_ulp, 2.0) << "at x = " << worst_x;
  EXPECT_TRUE(
      std::isnan(DeterministicExp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(DeterministicExp(0.0f), 1.0f);
  EXPECT_EQ(DeterministicExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(DeterministicExp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
}

TEST(DeterministicExpTest, VectorVersionsGiveScalarBits) {
  const std::vector<float> xs = SweepInputs();
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> scalar(n), vec(n);
  for (int64_t i = 0; i < n; ++i) scalar[i] = DeterministicExp(xs[i]);
  if (SupportedSimdLevel() >= SimdLevel::kAvx2) {
    ExpArrayAvx2(xs.data(), vec.data(), n);
    EXPECT_TRUE(SameBits(scalar, vec)) << "AVX2";
  }
  if (SupportedSimdLevel() >= SimdLevel::kAvx512) {
    ExpArrayAvx512(xs.data(), vec.data(), n);
    EXPECT_TRUE(SameBits(scalar, vec)) << "AVX-512";
  }
}

}  // namespace
}  // namespace lockstep::kernels
