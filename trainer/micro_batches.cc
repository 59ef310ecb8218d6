#include "trainer/micro_batches.h"

namespace lockstep::trainer {

std::vector<std::vector<int64_t>> PackMicroBatches(const std::vector<int64_t>& sequence_lengths,
                                                   int64_t token_budget) {
  std::vector<std::vector<int64_t>> batches;
  int64_t tokens_in_current = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(sequence_lengths.size()); ++i) {
    const int64_t length = sequence_lengths[i];
    const bool fits = token_budget <= 0 || tokens_in_current + length <= token_budget;
    if (batches.empty() || !fits) {
      batches.emplace_back();
      tokens_in_current = 0;
    }
    batches.back().push_back(i);
    tokens_in_current += length;
  }
  return batches;
}

}  // namespace lockstep::trainer
