// ArgMaxRows against a plain scalar scan (first index of the strictly largest value, NaN never
// winning), at every SIMD level, over row lengths that leave every tail size, with ties, NaN and
// -inf placed where a vector kernel could get them wrong.
#include "model/kernels/argmax_cpu.h"

#include <cmath>
#include <limits>

#include "tests/kernels/bit_test_util.h"

namespace lockstep::kernels {
namespace {

using testing::AvailableSimdLevels;
using testing::RandomFloats;
using testing::ScopedSimdLevel;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t Reference(const std::vector<float>& row) {
  int64_t index = 0;
  float best = -kInf;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] > best) {
      best = row[i];
      index = static_cast<int64_t>(i);
    }
  }
  return index;
}

int64_t ArgMaxOf(const std::vector<float>& row) {
  int64_t out = -1;
  ArgMaxRows(row.data(), static_cast<int64_t>(row.size()), &out, 0, 1);
  return out;
}

TEST(ArgMaxCpuTest, MatchesTheScalarScanAtEveryLevelAndLength) {
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    for (int64_t n : {1, 5, 8, 15, 16, 17, 31, 33, 100, 1000, 32000}) {
      for (uint32_t seed = 0; seed < 4; ++seed) {
        std::vector<float> row = RandomFloats(n, -3.0f, 3.0f, seed + 100 * n);
        EXPECT_EQ(ArgMaxOf(row), Reference(row)) << "n " << n << " level " << int(level);
        // The maximum repeated later (and earlier in another lane): the first one wins.
        const int64_t first = Reference(row);
        row[n - 1] = row[first];
        if (n > 20) row[first / 2 + 3 < n ? first / 2 + 3 : 0] = row[first];
        EXPECT_EQ(ArgMaxOf(row), Reference(row)) << "ties, n " << n << " level " << int(level);
      }
    }
  }
}

TEST(ArgMaxCpuTest, NanNeverWinsAndAllMinusInfGivesZero) {
  for (SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    std::vector<float> row = RandomFloats(40, -1.0f, 1.0f, 7);
    row[3] = kNan;
    row[0] = kNan;
    row[37] = 5.0f;  // in the tail of an 8- and 16-lane pass
    EXPECT_EQ(ArgMaxOf(row), 37) << int(level);
    EXPECT_EQ(ArgMaxOf(std::vector<float>(19, -kInf)), 0) << int(level);
    EXPECT_EQ(ArgMaxOf(std::vector<float>(19, kNan)), 0) << int(level);
    std::vector<float> late(35, -kInf);
    late[34] = -1e30f;  // the only finite value, in the scalar tail
    EXPECT_EQ(ArgMaxOf(late), 34) << int(level);
  }
}

TEST(ArgMaxCpuTest, RowsAreIndependent) {
  const int64_t rows = 5, cols = 77;
  std::vector<float> x = RandomFloats(rows * cols, -2.0f, 2.0f, 11);
  std::vector<int64_t> out(rows, -1);
  ArgMaxRows(x.data(), cols, out.data(), 1, 4);  // a sub-range: rows 0 and 4 untouched
  EXPECT_EQ(out[0], -1);
  EXPECT_EQ(out[4], -1);
  for (int64_t r = 1; r < 4; ++r) {
    EXPECT_EQ(out[r], Reference(std::vector<float>(x.begin() + r * cols,
                                                   x.begin() + (r + 1) * cols)));
  }
}

}  // namespace
}  // namespace lockstep::kernels
