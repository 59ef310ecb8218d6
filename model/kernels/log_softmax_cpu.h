// Batch-invariant log-softmax over the vocabulary with gather of target log-probs (fp32):
//   out[r] = (logits[r, t_r] / T) - log(sum_j exp(logits[r, j] / T - max_r)) - max_r
// where max_r = max_j logits[r, j] / T. Each row: one thread, one fixed order depending only on
// `vocab`. Also a full-row variant for sampling.
#ifndef LOCKSTEP_MODEL_KERNELS_LOG_SOFTMAX_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_LOG_SOFTMAX_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

// logits: [rows, vocab] row-major (row stride = vocab). targets: [rows]. out: [rows].
void TargetLogProbsRows(const float* logits, const int64_t* targets, float* out, int64_t vocab,
                        float temperature, int64_t row_begin, int64_t row_end);

// out[r, :] = log_softmax(logits[r, :] / temperature), same arithmetic as TargetLogProbsRows
// (out[r, t] == TargetLogProbsRows's value for target t, bit for bit).
void LogSoftmaxRows(const float* logits, float* out, int64_t vocab, float temperature,
                    int64_t row_begin, int64_t row_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_LOG_SOFTMAX_CPU_H_
