#include "generator/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/ops.h"

namespace lockstep::generator {

SampledToken SampleToken(const torch::Tensor& logits, Sequence& seq, NumericMode mode) {
  const SamplingParams& params = seq.params();
  const bool greedy = params.temperature <= 0.0;
  const double temperature = greedy ? 1.0 : params.temperature;
  torch::Tensor row = logits.reshape({1, -1}).to(torch::kFloat32).contiguous();
  torch::Tensor logprobs = ops::LogSoftmax(row, temperature, mode).contiguous();
  const float* lp = logprobs.data_ptr<float>();
  const float* raw = row.data_ptr<float>();
  const int64_t vocab = row.size(1);

  int64_t token = 0;
  if (greedy) {
    // First index of the largest logit, like torch::argmax.
    token = std::max_element(raw, raw + vocab) - raw;
  } else {
    // Candidates in descending logit order (ties: lower id first); restrict by top-k and top-p,
    // then draw from the renormalised probabilities with this sequence's own uniform.
    std::vector<int64_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    int64_t num_kept = vocab;
    const bool filter = params.top_k > 0 || params.top_p < 1.0;
    if (filter) {
      auto before = [raw](int64_t a, int64_t b) {
        return raw[a] > raw[b] || (raw[a] == raw[b] && a < b);
      };
      if (params.top_k > 0) num_kept = std::min(num_kept, params.top_k);
      if (num_kept < vocab && params.top_p >= 1.0) {
        std::partial_sort(order.begin(), order.begin() + num_kept, order.end(), before);
      } else {
        std::sort(order.begin(), order.end(), before);
      }
      if (params.top_p < 1.0) {
        // Smallest prefix whose probability mass reaches top_p (at least one token).
        double mass = 0.0;
        int64_t keep = 0;
        while (keep < num_kept && (keep == 0 || mass < params.top_p)) {
          mass += std::exp(static_cast<double>(lp[order[keep]]));
          ++keep;
        }
        num_kept = keep;
      }
    }
    double total = 0.0;
    for (int64_t i = 0; i < num_kept; ++i) total += std::exp(static_cast<double>(lp[order[i]]));
    const double target = seq.NextUniform() * total;
    double cumulative = 0.0;
    token = order[num_kept - 1];
    for (int64_t i = 0; i < num_kept; ++i) {
      cumulative += std::exp(static_cast<double>(lp[order[i]]));
      if (cumulative > target) {
        token = order[i];
        break;
      }
    }
  }
  return {token, lp[token]};
}

}  // namespace lockstep::generator
