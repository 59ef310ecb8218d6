// First index of the largest value of each row (fp32), for greedy sampling. The result is exact,
// so it is the same for any batch, split or thread count. NaN never wins; a row with no value
// above -inf gives 0.
// Raw pointers, no LibTorch include.
#ifndef LOCKSTEP_MODEL_KERNELS_ARGMAX_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_ARGMAX_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

// x: [rows, cols] row-major (row stride = cols). out[r] for rows [row_begin, row_end).
void ArgMaxRows(const float* x, int64_t cols, int64_t* out, int64_t row_begin, int64_t row_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ARGMAX_CPU_H_
