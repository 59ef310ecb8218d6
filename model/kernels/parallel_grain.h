// How much work one at::parallel_for task of the element and row kernels gets: enough to amortise
// handing it to another thread (a decode step's [8, 768] RMSNorm runs inline on the caller).
// Every kernel here gives the same bits for any split, so this is a speed choice only.
#ifndef LOCKSTEP_MODEL_KERNELS_PARALLEL_GRAIN_H_
#define LOCKSTEP_MODEL_KERNELS_PARALLEL_GRAIN_H_

#include <algorithm>
#include <cstdint>

namespace lockstep::kernels {

inline constexpr int64_t kElementGrain = 1 << 14;

// Rows per task for rows of `row_elements` elements: about kElementGrain elements.
inline int64_t RowGrain(int64_t row_elements) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, row_elements));
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_PARALLEL_GRAIN_H_
