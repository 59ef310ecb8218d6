// Packing sequences into micro-batches by a token budget (for gradient accumulation).
// Thread safety: pure function.
#ifndef LOCKSTEP_TRAINER_MICRO_BATCHES_H_
#define LOCKSTEP_TRAINER_MICRO_BATCHES_H_

#include <cstdint>
#include <vector>

namespace lockstep::trainer {

// Groups sequence indices 0..n-1 (in order) into micro-batches of at most `token_budget` tokens:
// a sequence joins the current micro-batch if it still fits, else starts a new one; a sequence
// longer than the budget gets a micro-batch of its own. Every index appears exactly once, in
// increasing order. token_budget <= 0 means one micro-batch for everything.
std::vector<std::vector<int64_t>> PackMicroBatches(const std::vector<int64_t>& sequence_lengths,
                                                   int64_t token_budget);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_MICRO_BATCHES_H_
