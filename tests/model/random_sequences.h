// Test helper shared by the model and parity tests: random token sequences, deterministic in seed.
#ifndef LOCKSTEP_TESTS_MODEL_RANDOM_SEQUENCES_H_
#define LOCKSTEP_TESTS_MODEL_RANDOM_SEQUENCES_H_

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace lockstep::testing {

// One sequence per entry of `lengths`, token ids uniform in [0, vocab).
inline std::vector<std::vector<int64_t>> RandomSequences(const std::vector<int64_t>& lengths,
                                                         int64_t vocab, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<int64_t>> sequences;
  for (int64_t length : lengths) {
    torch::Tensor ids = torch::randint(vocab, {length}, generator, torch::kInt64);
    sequences.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
  }
  return sequences;
}

}  // namespace lockstep::testing

#endif  // LOCKSTEP_TESTS_MODEL_RANDOM_SEQUENCES_H_
