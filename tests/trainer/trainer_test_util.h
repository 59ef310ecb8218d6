// Shared helpers for the trainer tests: a tiny model and deterministic synthetic batches.
#ifndef LOCKSTEP_TESTS_TRAINER_TRAINER_TEST_UTIL_H_
#define LOCKSTEP_TESTS_TRAINER_TRAINER_TEST_UTIL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"
#include "trainer/trainer.h"

namespace lockstep::trainer::testing {

// The tiny Qwen3 preset cut to 2 layers (fast enough for many steps in a test).
inline std::shared_ptr<Transformer> TinyModel(uint64_t seed, NumericMode mode) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  ModelOptions options;
  options.numeric_mode = mode;
  return CreateRandomModel(config, seed, options);
}

// `count` rollouts with random tokens, behaviour log-probs near -6 (so ratios move), advantages
// of both signs, every token sampled under `version`. Deterministic in `seed`.
inline std::vector<Rollout> RandomRollouts(uint64_t seed, int64_t count, int64_t version,
                                           int64_t vocab = 512) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<Rollout> rollouts;
  for (int64_t i = 0; i < count; ++i) {
    Rollout r;
    const int64_t prompt = 3 + torch::randint(6, {1}, g).item<int64_t>();
    const int64_t completion = 2 + torch::randint(8, {1}, g).item<int64_t>();
    torch::Tensor p = torch::randint(vocab, {prompt}, g, torch::kInt64);
    torch::Tensor c = torch::randint(vocab, {completion}, g, torch::kInt64);
    r.prompt_tokens.assign(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + prompt);
    r.completion_tokens.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + completion);
    torch::Tensor lp = -6.0 + 0.5 * torch::randn({completion}, g);
    r.behaviour_logprobs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + completion);
    r.weight_versions.assign(completion, version);
    r.advantage = (i % 2 == 0 ? 1.0 : -0.5) * (1 + i % 3);
    r.group_id = i / 2;
    rollouts.push_back(std::move(r));
  }
  return rollouts;
}

inline TensorMap CloneMap(const TensorMap& tensors) {
  TensorMap out;
  for (const auto& [name, t] : tensors) out[name] = t.detach().clone();
  return out;
}

inline bool BitEqual(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || !torch::equal(t, it->second)) return false;
  }
  return true;
}

}  // namespace lockstep::trainer::testing

#endif  // LOCKSTEP_TESTS_TRAINER_TRAINER_TEST_UTIL_H_
