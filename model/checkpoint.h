// Creating, loading and saving models in Hugging Face layout: a directory with `config.json` and
// `model.safetensors` (or shards with `model.safetensors.index.json`).
#ifndef LOCKSTEP_MODEL_CHECKPOINT_H_
#define LOCKSTEP_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace lockstep {

// A model with freshly initialised weights, deterministic in `seed`: embeddings ~ N(0, 0.02),
// linear weights ~ N(0, 1/in_features), norm weights ~ 1 + N(0, 0.1) (not exactly 1, so that a
// forward that forgot a norm weight shows up in the reference check), biases ~ N(0, 0.02).
std::shared_ptr<Transformer> CreateRandomModel(const ModelConfig& config, uint64_t seed,
                                               const ModelOptions& options = {});

// Copies `tensors` (Hugging Face names) into the model's parameters, converting dtype.
// Errors (InvalidArgument, naming `source` and the tensor): a parameter missing from `tensors`,
// a tensor the model does not have, a shape mismatch. `lm_head.weight` is accepted and ignored
// for tied models, as are `*.rotary_emb.inv_freq` buffers of older checkpoints.
absl::Status LoadStateDict(Transformer& model, const TensorMap& tensors,
                           const std::string& source);

// Loads `<dir>/config.json` and its safetensors weights.
absl::StatusOr<std::shared_ptr<Transformer>> LoadModel(const std::filesystem::path& dir,
                                                       const ModelOptions& options = {});

// The model's parameters by Hugging Face name (views, not copies).
TensorMap StateDict(const Transformer& model);

// Writes config.json and the weights (in config().torch_dtype) into `dir`, creating it. Weights
// larger than `max_shard_bytes` are split into shards with an index, as Hugging Face does.
absl::Status SaveModel(const Transformer& model, const std::filesystem::path& dir,
                       int64_t max_shard_bytes = int64_t{5} << 30);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_CHECKPOINT_H_
