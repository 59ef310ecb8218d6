#include "model/kernels/moe_routing_cpu.h"

#include <algorithm>
#include <vector>

#include "model/kernels/deterministic_math_cpu.h"

namespace lockstep::kernels {

void TopKRoutingRows(const float* logits, int64_t num_experts, int64_t k, bool normalize,
                     float* weights, int64_t* experts, int64_t row_begin, int64_t row_end) {
  std::vector<float> probs(num_experts);
  std::vector<char> taken(num_experts);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* l = logits + r * num_experts;
    float max = l[0];
    for (int64_t j = 1; j < num_experts; ++j) max = l[j] > max ? l[j] : max;
    float sum = 0.0f;
    for (int64_t j = 0; j < num_experts; ++j) {
      probs[j] = DeterministicExp(l[j] - max);
      sum += probs[j];
    }
    for (int64_t j = 0; j < num_experts; ++j) probs[j] /= sum;

    float* w = weights + r * k;
    int64_t* e = experts + r * k;
    std::fill(taken.begin(), taken.end(), 0);
    float chosen_sum = 0.0f;
    for (int64_t rank = 0; rank < k; ++rank) {
      int64_t best = -1;
      for (int64_t j = 0; j < num_experts; ++j) {  // strict >: the lowest index wins a tie
        if (!taken[j] && (best < 0 || probs[j] > probs[best])) best = j;
      }
      taken[best] = 1;
      e[rank] = best;
      w[rank] = probs[best];
      chosen_sum += probs[best];
    }
    if (normalize) {
      for (int64_t rank = 0; rank < k; ++rank) w[rank] /= chosen_sum;
    }
  }
}

}  // namespace lockstep::kernels
