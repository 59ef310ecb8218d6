// Runtime SIMD level for the batch-invariant CPU kernels (see
// deterministic_math_cpu.h).
#include "model/kernels/deterministic_math_cpu.h"

#include <algorithm>
#include <atomic>

namespace lockstep::kernels {
namespace {

SimdLevel DetectSimdLevel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    return SimdLevel::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return SimdLevel::kAvx2;
  return SimdLevel::kPortable;
}

std::atomic<int>& ActiveLevel() {
  static std::atomic<int> level{static_cast<int>(SupportedSimdLevel())};
  return level;
}

}  // namespace

SimdLevel SupportedSimdLevel() {
  static const SimdLevel level = DetectSimdLevel();
  return level;
}

SimdLevel ActiveSimdLevel() {
  return static_cast<SimdLevel>(ActiveLevel().load(std::memory_order_relaxed));
}

void SetSimdLevelForTesting(SimdLevel level) {
  const int clamped =
      std::min(static_cast<int>(level), static_cast<int>(SupportedSimdLevel()));
  ActiveLevel().store(clamped, std::memory_order_relaxed);
}

}  // namespace lockstep::kernels
