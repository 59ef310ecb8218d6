// --simd: the widest SIMD level our CPU kernels may use in a benchmark (auto: the CPU's own), so
// that an AVX-512 machine can time the kernels an AVX2-only CPU runs. It lowers the kernels'
// active level (deterministic_math_cpu.h), and the fixed-order linear's micro-kernel family
// follows it (linear_cpu.h). Stock LibTorch is not narrowed by it: Debian's OpenBLAS picks its
// core when the library loads, from the CPU or from OPENBLAS_CORETYPE (Haswell for AVX2), so set
// that in the environment for a like-for-like comparison; the benchmarks print the core.
#ifndef LOCKSTEP_BENCH_SIMD_FLAG_H_
#define LOCKSTEP_BENCH_SIMD_FLAG_H_

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::bench {

inline const char* SimdLevelName(kernels::SimdLevel level) {
  switch (level) {
    case kernels::SimdLevel::kAvx512:
      return "avx512";
    case kernels::SimdLevel::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

inline void AddSimdOption(CLI::App& app, std::string* level) {
  app.add_option("--simd", *level,
                 "Widest SIMD level of our CPU kernels: auto (the CPU's), avx512, avx2 or "
                 "portable; stock OpenBLAS follows OPENBLAS_CORETYPE instead")
      ->check(CLI::IsMember({"auto", "avx512", "avx2", "portable"}))
      ->capture_default_str();
}

// Sets the level; false, with a message, where this CPU lacks it.
inline bool ApplySimdLevel(const std::string& level) {
  if (level == "auto") return true;
  const kernels::SimdLevel wanted = level == "avx512" ? kernels::SimdLevel::kAvx512
                                    : level == "avx2" ? kernels::SimdLevel::kAvx2
                                                      : kernels::SimdLevel::kPortable;
  if (kernels::SupportedSimdLevel() < wanted) {
    std::fprintf(stderr, "--simd %s: this CPU's kernels go up to %s\n", level.c_str(),
                 SimdLevelName(kernels::SupportedSimdLevel()));
    return false;
  }
  kernels::SetSimdLevelForTesting(wanted);
  return true;
}

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_SIMD_FLAG_H_
