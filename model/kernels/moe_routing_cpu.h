// Batch-invariant top-k routing of a mixture-of-experts layer (fp32), per token row r:
//   p_j   = exp(l_j - m) / s,  m = max_j l_j,  s = sum_j exp(l_j - m) in increasing j
//   e_0.. = the k largest p_j, largest first; equal p_j: the lower expert index first
//   w_i   = p_{e_i}, or p_{e_i} / (p_{e_0} + ... + p_{e_{k-1}}) (summed in rank order) when
//           normalize (Hugging Face's norm_topk_prob)
// One row, one scalar loop in one fixed order that depends only on num_experts and k, so a row's
// choices and weights never depend on the rows beside it, the row range or the thread count.
// exp is DeterministicExp (deterministic_math_cpu.h). A NaN probability never wins a rank unless
// every remaining one is NaN.
#ifndef LOCKSTEP_MODEL_KERNELS_MOE_ROUTING_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_MOE_ROUTING_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

// logits: [rows, num_experts] row-major; weights: [rows, k] fp32; experts: [rows, k]. Rows
// [row_begin, row_end). 1 <= k <= num_experts.
void TopKRoutingRows(const float* logits, int64_t num_experts, int64_t k, bool normalize,
                     float* weights, int64_t* experts, int64_t row_begin, int64_t row_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_MOE_ROUTING_CPU_H_
