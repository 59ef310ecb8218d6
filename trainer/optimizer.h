// AdamW with explicit state tensors (so that a checkpoint holds it exactly) and global-norm
// gradient clipping. Implemented here rather than with torch::optim so that the state has stable
// names and a resumed run performs bit-for-bit the same arithmetic.
//
// Thread safety: not synchronised; one thread at a time.
#ifndef LOCKSTEP_TRAINER_OPTIMIZER_H_
#define LOCKSTEP_TRAINER_OPTIMIZER_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "model/safetensors.h"

namespace lockstep::trainer {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled; applied to parameters with >= 2 dimensions only
};

class AdamW {
 public:
  // `parameters`: (name, tensor) pairs; the tensors are updated in place from their .grad().
  AdamW(std::vector<std::pair<std::string, torch::Tensor>> parameters, AdamWOptions options);

  // One update with learning rate `lr`. Parameters without a gradient are skipped (their state
  // does not move). With t = step_count() + 1, for each parameter p with gradient g:
  //   p <- p - lr * wd * p                       (decoupled weight decay, matrices only)
  //   m <- b1 * m + (1 - b1) * g
  //   v <- b2 * v + (1 - b2) * g^2
  //   p <- p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  void Step(double lr);

  int64_t step_count() const { return step_count_; }

  // "exp_avg.<name>" and "exp_avg_sq.<name>" for every parameter, and "step" (int64 scalar as a
  // [1] tensor). The tensors are the live state, "step" included: a later Step or LoadStateDict
  // changes their values, never the tensors (a checkpoint writer copies from them at every save).
  TensorMap StateDict() const;
  // Replaces the state from StateDict()'s form. InvalidArgument naming the entry for a missing,
  // extra or mis-shaped tensor; nothing changes on error.
  absl::Status LoadStateDict(const TensorMap& state);

 private:
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t step_count_ = 0;
  torch::Tensor step_tensor_;  // int64 [1], always step_count_ (StateDict's "step")
};

// Global L2 norm of the gradients, sqrt(sum_p ||g_p||^2) (accumulated in float64, in order),
// returned before clipping; when max_norm > 0 and the norm exceeds it every gradient is scaled
// by max_norm / (norm + 1e-6). Undefined gradients are skipped.
double ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_OPTIMIZER_H_
