// Rotary position embedding, Hugging Face `rotate_half` convention:
//   q' = q * cos(p * f) + rotate_half(q) * sin(p * f),  rotate_half([a, b]) = [-b, a],
// where f = inv_freq repeated twice over the head dimension and
//   inv_freq_i = 1 / theta^(2i / head_dim),  i = 0 .. head_dim/2 - 1,
// optionally rescaled by Llama 3's frequency-dependent rule (see rope.cc).
//
// The cos/sin table is computed once per model for every position up to
// max_position_embeddings and then only indexed, so a position's rotation is the same bits in
// every batch, chunk and service (vectorised cos/sin can differ in the last bit between a SIMD
// lane and a scalar tail; indexing a table cannot).
#ifndef LOCKSTEP_MODEL_ROPE_H_
#define LOCKSTEP_MODEL_ROPE_H_

#include <torch/torch.h>

#include "model/config.h"

namespace lockstep {

// inv_freq as float32 [head_dim / 2], computed as Hugging Face does (in float32), including the
// Llama 3 rescaling when config.rope_scaling is set.
torch::Tensor RopeInverseFrequencies(const ModelConfig& config);

class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& config);

  // x: [num_tokens, num_heads, head_dim]; positions: [num_tokens] int64. Returns x rotated, in
  // x's dtype (the rotation itself runs in float32, like Hugging Face). Float32 CPU inputs that
  // need no gradient run one fused kernel (kernels/rope_ops.h) instead of ~13 LibTorch ops; it
  // gives the same bits, so the choice cannot split a trainer's grad and no-grad forwards.
  torch::Tensor Apply(const torch::Tensor& x, const torch::Tensor& positions) const;

  const torch::Tensor& cos() const { return cos_; }  // [max_positions, head_dim] float32
  const torch::Tensor& sin() const { return sin_; }

 private:
  torch::Tensor cos_;
  torch::Tensor sin_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_ROPE_H_
