// A minimal paged-KV decoding loop over a fixed set of sequences: one prefill of every prompt,
// then one token per sequence per step, all sequences batched together. It is the model-level
// reference for the paged path (tests, `lockstep forward --continue`); the generator's engine
// (continuous batching, preemption, sampling options) is the production path.
#ifndef LOCKSTEP_MODEL_SIMPLE_DECODER_H_
#define LOCKSTEP_MODEL_SIMPLE_DECODER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/transformer.h"

namespace lockstep {

struct SimpleDecodeOptions {
  int64_t max_new_tokens = 16;
  double temperature = 0.0;  // 0 = greedy (argmax), else sample from softmax(logits / T)
  uint64_t seed = 0;
  int64_t block_size = 16;
};

struct SimpleDecodeResult {
  std::vector<std::vector<int64_t>> tokens;    // new tokens per sequence
  std::vector<std::vector<float>> logprobs;    // log p(token) under softmax(logits / T), T=1 if greedy
};

// Decodes `max_new_tokens` after each prompt. Allocates its own KV cache (sized for the prompts
// plus the new tokens) and runs without autograd.
absl::StatusOr<SimpleDecodeResult> DecodeGreedyOrSampled(
    Transformer& model, const std::vector<std::vector<int64_t>>& prompts,
    const SimpleDecodeOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_SIMPLE_DECODER_H_
