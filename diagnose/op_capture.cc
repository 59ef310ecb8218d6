#include "diagnose/op_capture.h"

#include "model/ops.h"

namespace lockstep::diagnose {

OpCapture::OpCapture(const std::vector<int64_t>& num_tokens, NumericMode mode, double temperature,
                     OutputHook* hook)
    : mode_(mode), temperature_(temperature), hook_(hook) {
  offsets_.push_back(0);
  for (int64_t n : num_tokens) offsets_.push_back(offsets_.back() + n - 1);
}

void OpCapture::BeginForward(std::vector<RowKey> batch_rows) { batch_rows_ = std::move(batch_rows); }

void OpCapture::OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                         const std::vector<int64_t>* token_rows) {
  torch::NoGradGuard no_grad;
  const torch::Tensor detached = output.detach();
  // A view of the output's own storage where it is contiguous, so that a hook's change sticks.
  const torch::Tensor rows2d = detached.is_contiguous() ? detached.view({detached.size(0), -1})
                                                        : detached.reshape({detached.size(0), -1});
  const std::vector<RowKey> keys = KeysOf(rows2d.size(0), token_rows);
  if (hook_ != nullptr) hook_->OnOutput(layer, op, rows2d, keys);
  Record(layer, op, rows2d, keys);
  if (op == Op::kLmHead) {
    // The path's own vocabulary log-softmax of these logits rows (what its sampler or its
    // TargetLogProbs reads from).
    const torch::Tensor log_softmax = ops::LogSoftmax(rows2d, temperature_, mode_);
    if (hook_ != nullptr) hook_->OnOutput(-1, Op::kLogSoftmax, log_softmax, keys);
    Record(-1, Op::kLogSoftmax, log_softmax, keys);
  }
}

std::vector<RowKey> OpCapture::KeysOf(int64_t num_rows,
                                      const std::vector<int64_t>* token_rows) const {
  std::vector<RowKey> keys(num_rows);
  for (int64_t i = 0; i < num_rows; ++i) {
    const int64_t batch_row = token_rows == nullptr ? i : (*token_rows)[i];
    if (batch_row >= 0 && batch_row < static_cast<int64_t>(batch_rows_.size())) {
      keys[i] = batch_rows_[batch_row];
    }
  }
  return keys;
}

void OpCapture::Record(int64_t layer, Op op, const torch::Tensor& rows2d,
                       const std::vector<RowKey>& keys) {
  std::vector<int64_t> sources, destinations;
  for (int64_t i = 0; i < rows2d.size(0); ++i) {
    if (keys[i].sequence < 0) continue;
    sources.push_back(i);
    destinations.push_back(Row(keys[i].sequence, keys[i].position));
  }
  if (sources.empty()) return;
  Slot& slot = slots_[{layer, static_cast<int>(op)}];
  if (!slot.values.defined()) {
    slot.values = torch::zeros({num_rows(), rows2d.size(1)}, torch::kFloat32);
    slot.filled = torch::zeros({num_rows()}, torch::kBool);
  }
  const torch::Tensor destination_index = torch::tensor(destinations, torch::kInt64);
  slot.values.index_copy_(
      0, destination_index,
      rows2d.index_select(0, torch::tensor(sources, torch::kInt64)).to(torch::kFloat32));
  slot.filled.index_fill_(0, destination_index, true);
}

const OpCapture::Slot* OpCapture::Find(int64_t layer, Op op) const {
  auto it = slots_.find({layer, static_cast<int>(op)});
  return it == slots_.end() ? nullptr : &it->second;
}

int64_t OpCapture::bytes() const {
  int64_t total = 0;
  for (const auto& [key, slot] : slots_) total += slot.values.numel() * 4 + slot.filled.numel();
  return total;
}

}  // namespace lockstep::diagnose
