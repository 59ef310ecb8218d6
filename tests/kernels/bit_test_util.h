// Helpers for the batch-invariant kernel tests: bit-exact comparison, and the
// SIMD-level sweeps of simd_levels.h.
#ifndef LOCKSTEP_TESTS_KERNELS_BIT_TEST_UTIL_H_
#define LOCKSTEP_TESTS_KERNELS_BIT_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/kernels/deterministic_math_cpu.h"
#include "tests/kernels/simd_levels.h"

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

}  // namespace lockstep::kernels::testing

#endif  // LOCKSTEP_TESTS_KERNELS_BIT_TEST_UTIL_H_
