#include "generator/sequence.h"

#include <utility>

namespace lockstep::generator {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a full-period 64-bit stream with good mixing.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStopToken:
      return "stop";
    case FinishReason::kMaxTokens:
      return "length";
    case FinishReason::kAborted:
      return "aborted";
  }
  return "unknown";
}

Sequence::Sequence(int64_t request_id, int64_t sample_index, std::vector<int64_t> prompt,
                   const SamplingParams& params, uint64_t seed)
    : request_id_(request_id),
      sample_index_(sample_index),
      prompt_(std::move(prompt)),
      params_(params) {
  // Stream start = mix(seed, sample_index): sample i of a request has its own stream.
  uint64_t mixer = seed;
  rng_state_ = SplitMix64(mixer) ^ (static_cast<uint64_t>(sample_index) * 0xD1B54A32D192ED03ull);
}

int64_t Sequence::token_at(int64_t i) const {
  return i < num_prompt_tokens() ? prompt_[i] : generated_[i - num_prompt_tokens()];
}

void Sequence::AppendToken(int64_t token, float logprob, int64_t weight_version) {
  generated_.push_back(token);
  logprobs_.push_back(logprob);
  weight_versions_.push_back(weight_version);
}

double Sequence::NextUniform() {
  // Top 53 bits → a double in [0, 1).
  return static_cast<double>(SplitMix64(rng_state_) >> 11) * 0x1.0p-53;
}

}  // namespace lockstep::generator
