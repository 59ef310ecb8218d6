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

#include "generator/sequence.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::generator {

struct SampledToken {
  int64_t token = 0;
  float logprob = 0.0f;
};

// logits: one row [vocab] float32. Advances seq's random stream once unless greedy.
SampledToken SampleToken(const torch::Tensor& logits, Sequence& seq, NumericMode mode);

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_SAMPLER_H_
