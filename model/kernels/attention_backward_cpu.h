// The row passes of the causal attention backward (attention_backward_ops.h) on fp32 CPU rows,
// each fused into one pass over a row that sits in L1, where LibTorch took seven (masked_fill,
// softmax's three, mul, sum, addcmul): the probabilities from the scores, and the scores'
// gradient from the probabilities' gradient. Keys a row's query does not see are skipped and
// their entries written as 0. Gradients need not be batch-invariant (DESIGN.md); the exp is the
// kernels' own (deterministic_math_cpu.h).
// Raw pointers, no LibTorch include; rows [row_begin, row_end) so the caller can thread it.
#ifndef LOCKSTEP_MODEL_KERNELS_ATTENTION_BACKWARD_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_ATTENTION_BACKWARD_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

// Rows of `length` floats, back to back, in matrices of `rows_per_matrix` rows (one per kv head);
// within a matrix, rows_per_query consecutive rows belong to one query (its group of heads), and
// the matrix's q-th query sees keys [0, first_visible + q) (at most `length`).
struct CausalRows {
  int64_t length = 0;
  int64_t rows_per_matrix = 0;
  int64_t rows_per_query = 1;
  int64_t first_visible = 1;
};

// In place, scores -> probabilities: p_j = exp(s_j - max) / sum over the row's visible keys,
// 0 for the keys it does not see.
void CausalSoftmaxRows(float* scores, const CausalRows& rows, int64_t row_begin, int64_t row_end);

// In place, the probabilities' gradient -> the scores': g_j = p_j * (g_j - sum_k p_k g_k) over
// the visible keys, 0 for the rest.
void SoftmaxGradRows(const float* probs, float* grad, const CausalRows& rows, int64_t row_begin,
                     int64_t row_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ATTENTION_BACKWARD_CPU_H_
