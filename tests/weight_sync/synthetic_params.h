// Deterministic synthetic parameter sets for the weight-sync tests and benchmark: every process
// that calls SyntheticParams(spec) gets the same bits, so a receiver can check what it got
// without a second channel.
#ifndef LOCKSTEP_TESTS_WEIGHT_SYNC_SYNTHETIC_PARAMS_H_
#define LOCKSTEP_TESTS_WEIGHT_SYNC_SYNTHETIC_PARAMS_H_

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/safetensors.h"

namespace lockstep::weight_sync::testing {

struct SyntheticSpec {
  int64_t num_layers = 4;
  int64_t width = 64;  // each layer: [width, width] weight, [width] norm, [3 * width] bias
  uint64_t seed = 1;
};

// Layer i holds "layers.<i>.weight" [width, width], "layers.<i>.norm" [width] and
// "layers.<i>.bias" [3 * width], plus "embed" [7, width] (an odd size, so tensors straddle
// bucket boundaries). Values are N(0, 1) from `seed`, with -0.0, a denormal, infinities and a
// NaN payload planted in "embed" so that only a bit-exact transfer reproduces them.
inline TensorMap SyntheticParams(const SyntheticSpec& spec) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(spec.seed);
  TensorMap params;
  params["embed"] = torch::randn({7, spec.width});
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    params[absl::StrCat("layers.", i, ".weight")] = torch::randn({spec.width, spec.width});
    params[absl::StrCat("layers.", i, ".norm")] = torch::randn({spec.width});
    params[absl::StrCat("layers.", i, ".bias")] = torch::randn({3 * spec.width});
  }
  float* embed = params["embed"].data_ptr<float>();
  embed[0] = -0.0f;
  embed[1] = std::numeric_limits<float>::denorm_min();
  embed[2] = std::numeric_limits<float>::infinity();
  embed[3] = -std::numeric_limits<float>::infinity();
  const uint32_t nan_bits = 0x7fc01234u;
  std::memcpy(&embed[4], &nan_bits, sizeof(nan_bits));
  return params;
}

// The name of the first tensor of `actual` whose bytes differ from `expected` (cast to the
// actual dtype), or "" when all are identical and the names match.
inline std::string FirstBitDifference(const TensorMap& expected, const TensorMap& actual) {
  if (expected.size() != actual.size()) return "<tensor count>";
  for (const auto& [name, tensor] : expected) {
    auto it = actual.find(name);
    if (it == actual.end()) return name;
    torch::Tensor want = tensor.to(it->second.scalar_type()).contiguous();
    torch::Tensor got = it->second.contiguous();
    if (want.sizes() != got.sizes() ||
        std::memcmp(want.data_ptr(), got.data_ptr(), want.numel() * want.element_size()) != 0) {
      return name;
    }
  }
  return "";
}

}  // namespace lockstep::weight_sync::testing

#endif  // LOCKSTEP_TESTS_WEIGHT_SYNC_SYNTHETIC_PARAMS_H_
