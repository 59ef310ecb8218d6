#include "trainer/token_logprobs.h"

#include <algorithm>

#include "model/ops.h"
#include "model/packed_batch.h"

namespace lockstep::trainer {

absl::StatusOr<TokenLogprobs> ComputeTokenLogprobs(Transformer& model,
                                                   const std::vector<ScoredSequence>& sequences,
                                                   double temperature, bool with_entropy,
                                                   ForwardObserver* observer) {
  std::vector<std::vector<int64_t>> token_lists;
  std::vector<int64_t> rows, targets;
  TokenLogprobs out;
  out.cu_seqlens.push_back(0);
  int64_t offset = 0;
  for (const ScoredSequence& seq : sequences) {
    const int64_t length = static_cast<int64_t>(seq.tokens.size());
    const int64_t prompt = length - seq.num_completion;
    for (int64_t j = 0; j < seq.num_completion; ++j) {
      rows.push_back(offset + prompt + j - 1);
      targets.push_back(seq.tokens[prompt + j]);
    }
    out.cu_seqlens.push_back(static_cast<int64_t>(rows.size()));
    token_lists.push_back(seq.tokens);
    offset += length;
  }
  absl::StatusOr<PackedBatch> batch = PackSequences(token_lists);
  if (!batch.ok()) return batch.status();
  absl::StatusOr<torch::Tensor> hidden = model.Hidden(*batch, TrainingAttention{}, observer);
  if (!hidden.ok()) return hidden.status();
  try {
    torch::Tensor selected = hidden->index_select(0, torch::tensor(rows, torch::kInt64));
    torch::Tensor target_tensor = torch::tensor(targets, torch::kInt64);
    const NumericMode mode = model.options().numeric_mode;
    const int64_t total = static_cast<int64_t>(rows.size());
    const int64_t chunk = std::max<int64_t>(1, model.options().logits_chunk_tokens);
    std::vector<torch::Tensor> logprob_pieces, entropy_pieces;
    for (int64_t begin = 0; begin < total; begin += chunk) {
      const int64_t length = std::min(chunk, total - begin);
      torch::Tensor logits =
          model.Logits(selected.narrow(0, begin, length), ForwardKind::kTraining);
      if (observer != nullptr) {
        const std::vector<int64_t> token_rows(rows.begin() + begin, rows.begin() + begin + length);
        observer->OnOutput(-1, Op::kLmHead, logits, &token_rows);
      }
      logprob_pieces.push_back(
          ops::TargetLogProbs(logits, target_tensor.narrow(0, begin, length), temperature, mode));
      if (with_entropy) {
        torch::NoGradGuard no_grad;
        // H = -sum_v p_v log p_v,  p = softmax(logits / T)
        torch::Tensor log_p = torch::log_softmax(logits.detach() / temperature, -1);
        entropy_pieces.push_back(-(log_p.exp() * log_p).sum(-1));
      }
    }
    out.logprobs = logprob_pieces.empty() ? torch::zeros({0}) : torch::cat(logprob_pieces, 0);
    if (with_entropy) {
      out.entropy = entropy_pieces.empty() ? torch::zeros({0}) : torch::cat(entropy_pieces, 0);
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("trainer log-probs: LibTorch failed: ", e.what_without_backtrace()));
  }
  return out;
}

}  // namespace lockstep::trainer
