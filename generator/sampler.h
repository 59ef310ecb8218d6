// Picks the next token of each sequence from its logits row: greedy, temperature, top-k, top-p.
//
// Reproducibility: a sequence's token depends only on its own logits row and its own random
// stream (Sequence::NextUniform, one draw per generated token, seeded from (seed, sample index)),
// so in batch-invariant mode it never depends on which other sequences share the batch.
// The reported log-prob is ops::LogSoftmax(logits, temperature, mode)[token] (temperature 1 for
// greedy) over the full vocabulary — the same op, hence the same bits, as the trainer's
// Transformer::TargetLogProbs. top-k / top-p only restrict which tokens may be drawn.
#ifndef LOCKSTEP_GENERATOR_SAMPLER_H_
#define LOCKSTEP_GENERATOR_SAMPLER_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "generator/sequence.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::generator {

struct SampledToken {
  int64_t token = 0;
  float logprob = 0.0f;
};

// One draw: sequence `seq` picks its next token from row `row` of the step's logits.
struct SamplingPick {
  int64_t row = 0;
  Sequence* seq = nullptr;
};

// Samples every pick from logits [rows, vocab] (float32); result i is picks[i]'s. Picks may
// share a row (the samples of one prompt). The log-softmax runs once per temperature over all the
// rows drawn at it, and greedy picks share one argmax over the rows: a step's rows cost a few op
// calls, not a few per row. Per row the bits are those of a one-row call (ops::LogSoftmax works
// row by row, batch-invariantly in that mode), so a pick never depends on the other rows.
// Advances each non-greedy pick's random stream once.
std::vector<SampledToken> SampleTokens(const torch::Tensor& logits,
                                       const std::vector<SamplingPick>& picks, NumericMode mode);

// logits: one row [vocab] float32. SampleTokens with one pick.
SampledToken SampleToken(const torch::Tensor& logits, Sequence& seq, NumericMode mode);

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_SAMPLER_H_
