// The only place that calls the model. Owns the paged KV cache, turns a scheduled step into a
// PackedBatch + PagedAttention, applies copy-on-write block copies, runs the forward without
// autograd and returns the logits of the sequences that sample this step.
//
// Thread safety: none; used by the engine thread only.
#ifndef LOCKSTEP_GENERATOR_MODEL_RUNNER_H_
#define LOCKSTEP_GENERATOR_MODEL_RUNNER_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "generator/scheduler.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace lockstep::generator {

class ModelRunner {
 public:
  // Allocates a cache of num_blocks × block_size slots per layer in the model's compute dtype.
  ModelRunner(std::shared_ptr<Transformer> model, int64_t num_blocks, int64_t block_size);

  // Runs the step: float32 logits [number of step.sequences with samples(), vocab], in the order
  // of step.sequences. Does not change the sequences (the scheduler commits afterwards). A
  // non-null `observer` sees every op of the forward and the LM head (forward_observer.h; the
  // step's packed batch holds each scheduled sequence's new tokens in step order).
  // Errors: the model's InvalidArgument/Internal, or Internal for a LibTorch failure.
  absl::StatusOr<torch::Tensor> Run(const ScheduledStep& step,
                                    ForwardObserver* observer = nullptr);

  // Hot swap (between steps): the parameters become `tensors` by pointer, no copy
  // (Transformer::AdoptWeights). Returns the old storage for the caller to free. InvalidArgument
  // (model unchanged) on a missing tensor or a shape/dtype/device mismatch.
  absl::StatusOr<Transformer::ReleasedWeights> AdoptWeights(const TensorMap& tensors);

  // OK iff `tensors` holds every parameter with the model's shape and nothing unexpected (a tied
  // model's lm_head.weight and rotary inv_freq buffers are tolerated). Reads only a snapshot
  // taken at construction, so any thread may call it. InvalidArgument names the tensor.
  absl::Status CheckWeights(const TensorMap& tensors) const;

  const Transformer& model() const { return *model_; }
  torch::Dtype dtype() const { return model_->options().compute_dtype; }
  const PagedKvCache& cache() const { return cache_; }

 private:
  void CopyBlocks(const std::vector<BlockCopy>& copies);

  std::shared_ptr<Transformer> model_;
  PagedKvCache cache_;
  std::map<std::string, std::vector<int64_t>> parameter_shapes_;
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_MODEL_RUNNER_H_
