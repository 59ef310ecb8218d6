// One sample of a request as it moves through the engine: its prompt, the tokens generated so
// far with their fp32 log-probs and weight versions, where its keys/values live in the KV cache
// (block table), how many of its tokens the cache already holds, and its own random stream.
//
// Thread safety: none; a Sequence belongs to the engine thread.
#ifndef LOCKSTEP_GENERATOR_SEQUENCE_H_
#define LOCKSTEP_GENERATOR_SEQUENCE_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace lockstep::generator {

// How a sample picks its tokens. temperature 0 = greedy (argmax); top_k 0 = off; top_p 1 = off.
struct SamplingParams {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  int64_t max_tokens = 16;              // generated tokens at most (> 0)
  std::vector<int64_t> stop_token_ids;  // finish after sampling any of these (kept in output)
  std::optional<int64_t> eos_token_id;  // finish after sampling it (kept in output)
};

enum class SequenceStatus { kWaiting, kRunning, kFinished };
enum class FinishReason { kNone, kEos, kStopToken, kMaxTokens, kAborted };
const char* FinishReasonName(FinishReason reason);

class Sequence {
 public:
  // The random stream depends only on (seed, sample_index): never on batch composition.
  Sequence(int64_t request_id, int64_t sample_index, std::vector<int64_t> prompt,
           const SamplingParams& params, uint64_t seed);

  int64_t request_id() const { return request_id_; }
  int64_t sample_index() const { return sample_index_; }
  const SamplingParams& params() const { return params_; }

  int64_t num_prompt_tokens() const { return static_cast<int64_t>(prompt_.size()); }
  int64_t num_generated_tokens() const { return static_cast<int64_t>(generated_.size()); }
  int64_t num_tokens() const { return num_prompt_tokens() + num_generated_tokens(); }
  // Token at position i of prompt + generated.
  int64_t token_at(int64_t i) const;
  const std::vector<int64_t>& prompt() const { return prompt_; }
  const std::vector<int64_t>& generated() const { return generated_; }
  const std::vector<float>& logprobs() const { return logprobs_; }
  const std::vector<int64_t>& weight_versions() const { return weight_versions_; }
  // Mixture-of-experts models: each generated token's routing, [token][sparse layer][k] (the
  // experts of the row whose logits it was sampled from); empty for dense models.
  const std::vector<int32_t>& routed_experts() const { return routed_experts_; }

  // Appends a sampled token with its log-prob and the weight version it was sampled under.
  void AppendToken(int64_t token, float logprob, int64_t weight_version);
  // Appends the last token's routing: one expert id per (sparse layer, rank).
  void AppendRouting(const std::vector<int32_t>& experts) {
    routed_experts_.insert(routed_experts_.end(), experts.begin(), experts.end());
  }

  // Next uniform draw in [0, 1) of this sample's stream; called once per generated token.
  double NextUniform();

  // Tokens whose keys/values are in the cache (positions 0 .. num_computed_tokens - 1).
  int64_t num_computed_tokens = 0;
  std::vector<int32_t> block_table;  // cache blocks in position order
  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int64_t num_preemptions = 0;

 private:
  int64_t request_id_, sample_index_;
  std::vector<int64_t> prompt_;
  SamplingParams params_;
  uint64_t rng_state_;
  std::vector<int64_t> generated_;
  std::vector<float> logprobs_;
  std::vector<int64_t> weight_versions_;
  std::vector<int32_t> routed_experts_;
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_SEQUENCE_H_
