// Rotary embedding from a cos/sin table, Hugging Face rotate_half convention (fp32):
//   out[t, h, i] = x[t, h, i] * cos[p_t, i] - x[t, h, i + half] * sin[p_t, i]   (i < half)
//   out[t, h, i] = x[t, h, i] * cos[p_t, i] + x[t, h, i - half] * sin[p_t, i]   (i >= half)
// with p_t = positions[t]: two rounded products and one rounded sum per element, never fused,
// which is the bits of LibTorch's `x * cos + cat(-x2, x1) * sin` (negating a product is exact).
// Raw pointers, no LibTorch include.
#ifndef LOCKSTEP_MODEL_KERNELS_ROPE_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_ROPE_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

struct RopeProblem {
  const float* x = nullptr;          // [num_tokens, num_heads, head_dim], contiguous
  const float* cos = nullptr;        // [max_positions, head_dim], contiguous
  const float* sin = nullptr;        // same
  const int64_t* positions = nullptr;  // [num_tokens], each in [0, max_positions)
  int64_t num_heads = 0;
  int64_t head_dim = 0;              // even
  float* out = nullptr;              // like x; may not alias it
};

// Rotates tokens [token_begin, token_end).
void RotateHalfTokens(const RopeProblem& problem, int64_t token_begin, int64_t token_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ROPE_CPU_H_
