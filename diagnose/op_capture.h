// Records, for one execution path, the output rows of every op at the positions diagnose
// compares: positions 0 .. n-2 of each compared sequence of n tokens (every position whose
// hidden state both the training forward and the generator compute; the head ops exist only
// at the rows that predict a completion token). Nothing else is kept: not the rows of filler
// sequences, not the last token's, and never a whole activation tensor.
//
// Values are kept as float32 (a bfloat16 path's values convert exactly). The capture also
// computes the vocabulary log-softmax of each LM-head row it sees, with the path's own op
// (ops::LogSoftmax in the path's numeric mode and temperature), as Op::kLogSoftmax.
//
// Thread safety: none; one forward at a time.
#ifndef LOCKSTEP_DIAGNOSE_OP_CAPTURE_H_
#define LOCKSTEP_DIAGNOSE_OP_CAPTURE_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "model/forward_observer.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::diagnose {

// Where a packed-batch row belongs: compared sequence `sequence` (index in the capture) at
// `position`, or sequence -1 for a row nobody compares.
struct RowKey {
  int64_t sequence = -1;
  int64_t position = 0;
};

// Tests: sees each op output before the capture records it, with the key of each of its rows,
// and may change it in place (the change then flows downstream, as a kernel's error would).
class OutputHook {
 public:
  virtual ~OutputHook() = default;
  virtual void OnOutput(int64_t layer, Op op, const torch::Tensor& rows,
                        const std::vector<RowKey>& row_keys) = 0;
};

class OpCapture : public ForwardObserver {
 public:
  // num_tokens[s]: tokens of compared sequence s (>= 2). `hook` (not owned, may be null) sees
  // every output first.
  OpCapture(const std::vector<int64_t>& num_tokens, NumericMode mode, double temperature,
            OutputHook* hook = nullptr);

  // Before each forward: the key of every row of its packed batch.
  void BeginForward(std::vector<RowKey> batch_rows);

  void OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                const std::vector<int64_t>* token_rows) override;

  struct Slot {
    torch::Tensor values;  // [total_rows, width] float32
    torch::Tensor filled;  // [total_rows] bool
  };
  // The op's rows, or null when it was never seen (q_norm on Llama, say).
  const Slot* Find(int64_t layer, Op op) const;
  const std::map<std::pair<int64_t, int>, Slot>& slots() const { return slots_; }

  // Capture row of (sequence, position); position in [0, num_tokens[sequence] - 2].
  int64_t Row(int64_t sequence, int64_t position) const { return offsets_[sequence] + position; }
  int64_t num_rows() const { return offsets_.back(); }
  int64_t num_sequences() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  // Bytes held by the captured rows.
  int64_t bytes() const;

 private:
  // The key of each row of an output (token_rows as in OnOutput).
  std::vector<RowKey> KeysOf(int64_t num_rows, const std::vector<int64_t>* token_rows) const;
  void Record(int64_t layer, Op op, const torch::Tensor& rows2d,
              const std::vector<RowKey>& keys);

  std::vector<int64_t> offsets_;  // [num_sequences + 1]
  NumericMode mode_;
  double temperature_;
  OutputHook* hook_;
  std::vector<RowKey> batch_rows_;
  std::map<std::pair<int64_t, int>, Slot> slots_;
};

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_OP_CAPTURE_H_
