#include "model/simple_decoder.h"

#include "absl/strings/str_cat.h"
#include "model/ops.h"

namespace lockstep {

absl::StatusOr<SimpleDecodeResult> DecodeGreedyOrSampled(
    Transformer& model, const std::vector<std::vector<int64_t>>& prompts,
    const SimpleDecodeOptions& options) {
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts to decode");
  if (options.max_new_tokens < 0) return absl::InvalidArgumentError("max_new_tokens < 0");
  torch::NoGradGuard no_grad;
  const int64_t num_sequences = static_cast<int64_t>(prompts.size());
  const int64_t block_size = options.block_size;

  // Contiguous blocks per sequence: sequence s owns blocks [s * per_seq, (s + 1) * per_seq).
  int64_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max<int64_t>(longest, prompt.size());
  const int64_t blocks_per_sequence =
      (longest + options.max_new_tokens + block_size - 1) / block_size;
  PagedKvCache cache = AllocatePagedKvCache(model.config(), num_sequences * blocks_per_sequence,
                                            block_size, model.options().compute_dtype);
  PagedAttention paged{&cache, ContiguousBlockTables(num_sequences, blocks_per_sequence)};

  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  SimpleDecodeResult result;
  result.tokens.resize(num_sequences);
  result.logprobs.resize(num_sequences);
  std::vector<std::vector<int64_t>> step_tokens = prompts;
  std::vector<int64_t> starts(num_sequences, 0);
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    absl::StatusOr<PackedBatch> batch = PackContinuations(step_tokens, starts);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<torch::Tensor> hidden = model.Hidden(*batch, paged);
    if (!hidden.ok()) return hidden.status();
    torch::Tensor logits = model.Logits(Transformer::LastTokenRows(*hidden, *batch), paged.kind);
    const double temperature = options.temperature > 0 ? options.temperature : 1.0;
    torch::Tensor logprobs = ops::LogSoftmax(logits, temperature, model.options().numeric_mode);
    torch::Tensor next = options.temperature > 0
                             ? torch::multinomial(logprobs.exp(), 1, false, generator).squeeze(1)
                             : logits.argmax(-1);
    torch::Tensor chosen = logprobs.gather(1, next.unsqueeze(1)).squeeze(1);
    for (int64_t s = 0; s < num_sequences; ++s) {
      starts[s] += static_cast<int64_t>(step_tokens[s].size());
      const int64_t token = next[s].item<int64_t>();
      result.tokens[s].push_back(token);
      result.logprobs[s].push_back(chosen[s].item<float>());
      step_tokens[s] = {token};
    }
  }
  return result;
}

}  // namespace lockstep
