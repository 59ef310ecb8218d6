// Helpers for the batch-invariant kernel tests: bit-exact comparison and
// SIMD-level sweeps.
#ifndef LOCKSTEP_TESTS_KERNELS_BIT_TEST_UTIL_H_
#define LOCKSTEP_TESTS_KERNELS_BIT_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels::testing {

inline uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// Passes iff a and b hold the same float bits; reports the first differing
// index.
inline ::testing::AssertionResult SameBits(const float* a, const float* b,
                                           int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (Bits(a[i]) != Bits(b[i])) {
      return ::testing::AssertionFailure()
             << "first difference at " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult SameBits(const std::vector<float>& a,
                                           const std::vector<float>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "size differs";
  return SameBits(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

// Every SIMD level this CPU runs, lowest first.
inline std::vector<SimdLevel> AvailableSimdLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kPortable};
  if (SupportedSimdLevel() >= SimdLevel::kAvx2)
    levels.push_back(SimdLevel::kAvx2);
  if (SupportedSimdLevel() >= SimdLevel::kAvx512)
    levels.push_back(SimdLevel::kAvx512);
  return levels;
}

// Sets the kernels' SIMD level for one scope, then restores the best supported
// level.
class ScopedSimdLevel {
 public:
  explicit ScopedSimdLevel(SimdLevel level) { SetSimdLevelForTesting(level); }
  ~ScopedSimdLevel() { SetSimdLevelForTesting(SupportedSimdLevel()); }
  ScopedSimdLevel(const ScopedSimdLevel&) = delete;
  ScopedSimdLevel& operator=(const ScopedSimdLevel&) = delete;
};

inline std::vector<float> RandomFloats(int64_t n, float lo, float hi,
                                       uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace lockstep::kernels::testing

#endif  // LOCKSTEP_TESTS_KERNELS_BIT_TEST_UTIL_H_
