#include "model/rope.h"

#include <cmath>

#include "model/kernels/rope_ops.h"
#include "model/kernels/wants_grad.h"

namespace lockstep {

torch::Tensor RopeInverseFrequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  // 1 / theta^(arange(0, dim, 2) / dim), in float32 as transformers computes it.
  torch::Tensor exponents = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / dim;
  torch::Tensor inv_freq = 1.0 / torch::pow(config.rope_theta, exponents);
  if (!config.rope_scaling) return inv_freq;

  // Llama 3 scaling: wavelengths longer than original_max / low_freq_factor are divided by
  // `factor`; shorter than original_max / high_freq_factor are kept; in between, interpolate:
  //   smooth = (original_max / wavelen - low) / (high - low)
  //   f' = (1 - smooth) * f / factor + smooth * f
  const Llama3RopeScaling& s = *config.rope_scaling;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  torch::Tensor wavelen = 2 * M_PI / inv_freq;
  torch::Tensor scaled =
      torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  torch::Tensor smooth =
      (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  torch::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  torch::Tensor is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen);
  return torch::where(is_medium, smoothed, scaled);
}

RopeTable::RopeTable(const ModelConfig& config) {
  torch::NoGradGuard no_grad;
  torch::Tensor inv_freq = RopeInverseFrequencies(config);
  torch::Tensor positions = torch::arange(config.max_position_embeddings, torch::kInt64)
                                .to(torch::kFloat32);
  torch::Tensor freqs = torch::outer(positions, inv_freq);  // [max_positions, head_dim / 2]
  torch::Tensor angles = torch::cat({freqs, freqs}, /*dim=*/-1);
  cos_ = angles.cos().contiguous();
  sin_ = angles.sin().contiguous();
}

torch::Tensor RopeTable::Apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  // The fused kernel gives the formula's bits; it has no backward, so graphs keep the formula.
  // CUDA tensors run its CUDA glue (the tables stay on the host; it uploads the rows it needs).
  if (!kernels::WantsGrad(x) && (x.is_cpu() || x.is_cuda()) && x.scalar_type() == torch::kFloat32 &&
      x.dim() == 3) {
    return kernels::RotateHalfFromTable(x, cos_, sin_, positions);
  }
  const int64_t half = x.size(-1) / 2;
  // The table rows on x's device ([T, 1, head_dim]; both moves are no-ops on the CPU).
  const torch::Tensor table_positions = positions.to(cos_.device());
  torch::Tensor cos = cos_.index_select(0, table_positions).unsqueeze(1).to(x.device());
  torch::Tensor sin = sin_.index_select(0, table_positions).unsqueeze(1).to(x.device());
  torch::Tensor xf = x.to(torch::kFloat32);
  torch::Tensor rotated = torch::cat({-xf.narrow(-1, half, half), xf.narrow(-1, 0, half)}, -1);
  return (xf * cos + rotated * sin).to(x.scalar_type());
}

}  // namespace lockstep
