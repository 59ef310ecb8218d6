// Rotary embedding (see rope_cpu.h). Compiled with -ffp-contract=off like every kernel here, so
// the products and the sum round separately, as in the stock formula.
#include "model/kernels/rope_cpu.h"

namespace lockstep::kernels {

void RotateHalfTokens(const RopeProblem& problem, int64_t token_begin, int64_t token_end) {
  const int64_t dim = problem.head_dim;
  const int64_t half = dim / 2;
  for (int64_t t = token_begin; t < token_end; ++t) {
    const float* cos = problem.cos + problem.positions[t] * dim;
    const float* sin = problem.sin + problem.positions[t] * dim;
    for (int64_t h = 0; h < problem.num_heads; ++h) {
      const float* x = problem.x + (t * problem.num_heads + h) * dim;
      float* out = problem.out + (t * problem.num_heads + h) * dim;
      for (int64_t i = 0; i < half; ++i) out[i] = x[i] * cos[i] - x[i + half] * sin[i];
      for (int64_t i = half; i < dim; ++i) out[i] = x[i] * cos[i] + x[i - half] * sin[i];
    }
  }
}

}  // namespace lockstep::kernels
