// SIMD-level sweeps and random inputs for the kernel tests and benchmarks
// (bench_misc_kernels): no GoogleTest here, so that a benchmark can include it.
#ifndef LOCKSTEP_TESTS_KERNELS_SIMD_LEVELS_H_
#define LOCKSTEP_TESTS_KERNELS_SIMD_LEVELS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels::testing {

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

#endif  // LOCKSTEP_TESTS_KERNELS_SIMD_LEVELS_H_
