#include "generator/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/ops.h"

namespace lockstep::generator {

namespace {

bool Greedy(const Sequence& seq) { return seq.params().temperature <= 0.0; }

// The temperature of the pick's log-probs: 1 for greedy.
double PickTemperature(const Sequence& seq) {
  return Greedy(seq) ? 1.0 : seq.params().temperature;
}

// Draws from one row: raw logits and their log-probs at the pick's temperature, [vocab] each.
SampledToken SampleRow(const float* raw, const float* lp, int64_t vocab, int64_t greedy_token,
                       Sequence& seq) {
  const SamplingParams& params = seq.params();
  int64_t token = greedy_token;
  if (!Greedy(seq)) {
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

}  // namespace

std::vector<SampledToken> SampleTokens(const torch::Tensor& logits,
                                       const std::vector<SamplingPick>& picks, NumericMode mode) {
  const torch::Tensor rows = logits.to(torch::kFloat32).contiguous();
  const int64_t vocab = rows.size(1);
  // Per temperature: the distinct rows drawn at it, in first-use order, and their log-probs.
  struct Group {
    double temperature;
    std::vector<int64_t> rows;
    torch::Tensor logprobs;
  };
  std::vector<Group> groups;
  std::vector<std::pair<size_t, int64_t>> where(picks.size());  // (group, row within it)
  bool any_greedy = false;
  for (size_t i = 0; i < picks.size(); ++i) {
    const double temperature = PickTemperature(*picks[i].seq);
    any_greedy = any_greedy || Greedy(*picks[i].seq);
    size_t g = 0;
    while (g < groups.size() && groups[g].temperature != temperature) ++g;
    if (g == groups.size()) groups.push_back({temperature, {}, {}});
    std::vector<int64_t>& group_rows = groups[g].rows;
    auto found = std::find(group_rows.begin(), group_rows.end(), picks[i].row);
    if (found == group_rows.end()) found = group_rows.insert(group_rows.end(), picks[i].row);
    where[i] = {g, found - group_rows.begin()};
  }
  std::vector<int64_t> all(rows.size(0));  // a group of every row in order needs no gather
  std::iota(all.begin(), all.end(), 0);
  for (Group& group : groups) {
    const torch::Tensor selected =
        group.rows == all ? rows : rows.index_select(0, torch::tensor(group.rows, torch::kInt64));
    group.logprobs = ops::LogSoftmax(selected, group.temperature, mode).contiguous();
  }
  // First index of the largest logit of each row (torch::argmax's rule).
  const torch::Tensor argmax = any_greedy ? ops::ArgMaxRows(rows) : torch::Tensor();
  std::vector<SampledToken> out;
  out.reserve(picks.size());
  for (size_t i = 0; i < picks.size(); ++i) {
    const auto [g, position] = where[i];
    const int64_t row = picks[i].row;
    const int64_t greedy_token = any_greedy ? argmax.data_ptr<int64_t>()[row] : 0;
    out.push_back(SampleRow(rows.data_ptr<float>() + row * vocab,
                            groups[g].logprobs.data_ptr<float>() + position * vocab, vocab,
                            greedy_token, *picks[i].seq));
  }
  return out;
}

SampledToken SampleToken(const torch::Tensor& logits, Sequence& seq, NumericMode mode) {
  return SampleTokens(logits.reshape({1, -1}), {{0, &seq}}, mode)[0];
}

}  // namespace lockstep::generator
