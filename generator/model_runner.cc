#include "generator/model_runner.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"

namespace lockstep::generator {

ModelRunner::ModelRunner(std::shared_ptr<Transformer> model, int64_t num_blocks, int64_t block_size)
    : model_(std::move(model)),
      cache_(AllocatePagedKvCache(model_->config(), num_blocks, block_size,
                                  model_->options().compute_dtype)) {
  for (const auto& item : model_->named_parameters()) {
    parameter_shapes_[item.key()] = item.value().sizes().vec();
  }
}

absl::Status ModelRunner::CheckWeights(const TensorMap& tensors) const {
  for (const auto& [name, shape] : parameter_shapes_) {
    auto found = tensors.find(name);
    if (found == tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat("weights: tensor '", name, "' is missing"));
    }
    if (found->second.sizes().vec() != shape) {
      return absl::InvalidArgumentError(absl::StrCat("weights: tensor '", name, "' has shape ",
                                                     c10::str(found->second.sizes()),
                                                     ", the model expects ", c10::str(shape)));
    }
  }
  for (const auto& [name, tensor] : tensors) {
    const bool tolerated = name == "lm_head.weight" || absl::EndsWith(name, "rotary_emb.inv_freq");
    if (!parameter_shapes_.count(name) && !tolerated) {
      return absl::InvalidArgumentError(absl::StrCat("weights: unexpected tensor '", name, "'"));
    }
  }
  return absl::OkStatus();
}

void ModelRunner::CopyBlocks(const std::vector<BlockCopy>& copies) {
  for (const BlockCopy& copy : copies) {
    for (size_t layer = 0; layer < cache_.keys.size(); ++layer) {
      cache_.keys[layer][copy.destination].copy_(cache_.keys[layer][copy.source]);
      cache_.values[layer][copy.destination].copy_(cache_.values[layer][copy.source]);
    }
  }
}

absl::StatusOr<torch::Tensor> ModelRunner::Run(const ScheduledStep& step,
                                               ForwardObserver* observer) {
  torch::NoGradGuard no_grad;
  try {
    CopyBlocks(step.block_copies);
    std::vector<std::vector<int64_t>> tokens;
    std::vector<int64_t> starts;
    PagedAttention paged{&cache_, {}};
    std::vector<int64_t> sampling_rows;
    for (size_t i = 0; i < step.sequences.size(); ++i) {
      const ScheduledSequence& s = step.sequences[i];
      std::vector<int64_t> chunk;
      for (int64_t p = 0; p < s.num_new_tokens; ++p) {
        chunk.push_back(s.seq->token_at(s.seq->num_computed_tokens + p));
      }
      tokens.push_back(std::move(chunk));
      starts.push_back(s.seq->num_computed_tokens);
      paged.block_tables.push_back(s.seq->block_table);
      if (s.samples()) sampling_rows.push_back(static_cast<int64_t>(i));
    }
    absl::StatusOr<PackedBatch> batch = PackContinuations(tokens, starts);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<torch::Tensor> hidden = model_->Hidden(*batch, paged, observer);
    if (!hidden.ok()) return hidden.status();
    if (sampling_rows.empty()) {
      return torch::empty({0, model_->config().vocab_size}, torch::kFloat32);
    }
    torch::Tensor last = Transformer::LastTokenRows(*hidden, *batch);
    torch::Tensor logits = model_->Logits(
        last.index_select(0, torch::tensor(sampling_rows, torch::kInt64)), paged.kind);
    if (observer != nullptr) {
      std::vector<int64_t> token_rows;  // packed-batch row of each logits row
      for (int64_t i : sampling_rows) token_rows.push_back(batch->cu_seqlens[i + 1] - 1);
      observer->OnOutput(-1, Op::kLmHead, logits, &token_rows);
    }
    return logits;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("model runner: ", e.what_without_backtrace()));
  }
}


absl::StatusOr<Transformer::ReleasedWeights> ModelRunner::AdoptWeights(const TensorMap& tensors) {
  try {
    return model_->AdoptWeights(tensors);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("installing weights: ", e.what_without_backtrace()));
  }
}

}  // namespace lockstep::generator
