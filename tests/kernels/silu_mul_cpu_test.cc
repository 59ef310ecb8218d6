// SiluMul: accuracy against double, and an element's bits do not depend on its
// offset, the call's range or the SIMD level.
#include "model/kernels/silu_mul_cpu.h"

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

TEST(SiluMulTest, MatchesDoubleReference) {
  std::vector<float> gate = RandomFloats(10007, -20.0f, 20.0f, 1);
  const std::vector<float> up = RandomFloats(gate.size(), -3.0f, 3.0f, 2);
  for (float g : {0.0f, -0.0f, 1e-30f, -1e-30f, 80.0f, -80.0f, 100.0f, -100.0f})
    gate.push_back(g);
  gate.resize(up.size());
  std::vector<float> out(gate.size());
  SiluMul(gate.data(), up.data(), out.data(), 0,
          static_cast<int64_t>(gate.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double ref = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-37)
        << "gate " << gate[i];
  }
}

TEST(SiluMulTest, ElementBitsIndependentOfOffsetAndRange) {
  const std::vector<float> values = RandomFloats(37, -12.0f, 12.0f, 3);
  const std::vector<float> ups = RandomFloats(37, -2.0f, 2.0f, 4);
  // Reference: each element computed alone in a one-element call.
  std::vector<float> alone(values.size());
  for (size_t k = 0; k < values.size(); ++k)
    SiluMul(&values[k], &ups[k], &alone[k], 0, 1);
  // Place every value at every offset 0..47 of a 48-long array (vector body and
  // tail positions for both 8- and 16-wide bodies), computed in calls with
  // varying begin.
  const int64_t n = 48;
  for (size_t k = 0; k < values.size(); ++k) {
    for (int64_t offset = 0; offset < n; ++offset) {
      std::vector<float> gate = RandomFloats(n, -5.0f, 5.0f, 100 + offset);
      std::vector<float> up = RandomFloats(n, -5.0f, 5.0f, 200 + offset);
      gate[offset] = values[k];
      up[offset] = ups[k];
      std::vector<float> out(n);
      const int64_t begin = offset % 3 == 0 ? 0 : offset / 2;
      SiluMul(gate.data(), up.data(), out.data(), begin, n);
      ASSERT_TRUE(SameBits(&out[offset], &alone[k], 1))
          << "value " << k << " offset " << offset;
    }
  }
}

TEST(SiluMulTest, EverySimdLevelGivesSameBits) {
  const int64_t n = 4099;
  const std::vector<float> gate = RandomFloats(n, -30.0f, 30.0f, 5);
  const std::vector<float> up = RandomFloats(n, -3.0f, 3.0f, 6);
  std::vector<float> reference(n);
  {
    ScopedSimdLevel level(SimdLevel::kPortable);
    SiluMul(gate.data(), up.data(), reference.data(), 0, n);
  }
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    std::vector<float> out(n);
    SiluMul(gate.data(), up.data(), out.data(), 0, n);
    EXPECT_TRUE(SameBits(out, reference))
        << "level " << static_cast<int>(level);
    // Odd sub-ranges shift the vector/tail boundary.
    std::vector<float> pieces(n);
    for (int64_t begin = 0; begin < n;) {
      const int64_t end = std::min(n, begin + 1 + (begin * 7919) % 61);
      SiluMul(gate.data(), up.data(), pieces.data(), begin, end);
      begin = end;
    }
    EXPECT_TRUE(SameBits(pieces, reference))
        << "level " << static_cast<int>(level);
  }
}

}  // namespace
}  // namespace lockstep::kernels
