#include "model/checkpoint.h"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

torch::Dtype TorchDtype(StorageDtype dtype) {
  switch (dtype) {
    case StorageDtype::kBFloat16:
      return torch::kBFloat16;
    case StorageDtype::kFloat16:
      return torch::kFloat16;
    case StorageDtype::kFloat32:
      return torch::kFloat32;
  }
  return torch::kFloat32;
}

bool IsIgnorableCheckpointTensor(const std::string& name, const Transformer& model) {
  if (absl::EndsWith(name, "rotary_emb.inv_freq")) return true;
  return name == "lm_head.weight" && model.config().tie_word_embeddings;
}

}  // namespace

std::shared_ptr<Transformer> CreateRandomModel(const ModelConfig& config, uint64_t seed,
                                               const ModelOptions& options) {
  auto model = std::make_shared<Transformer>(config, options);
  torch::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  // Registration order is fixed by the architecture, so the draws are too.
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    torch::Tensor draw = torch::empty(p.sizes(), torch::kFloat32);
    if (absl::EndsWith(name, "embed_tokens.weight")) {
      draw.normal_(0.0, 0.02, generator);
    } else if (absl::StrContains(name, "norm.weight")) {
      draw.normal_(1.0, 0.1, generator);
    } else if (absl::EndsWith(name, ".bias")) {
      draw.normal_(0.0, 0.02, generator);
    } else {
      draw.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(1))), generator);
    }
    p.copy_(draw);
  }
  return model;
}

TensorMap StateDict(const Transformer& model) {
  TensorMap tensors;
  for (const auto& item : model.named_parameters()) tensors[item.key()] = item.value();
  return tensors;
}

namespace {

// Matches checkpoint tensors to the model's parameters by name, for both LoadStateDict (a
// TensorMap) and LoadModel (entries streamed from the file), so that both report the same
// errors, each naming `source` and the tensor: unexpected, misshaped, twice, missing.
class ParameterMatcher {
 public:
  ParameterMatcher(const Transformer& model, std::string source)
      : model_(model), source_(std::move(source)) {
    for (const auto& item : model.named_parameters()) {
      parameters_.emplace(item.key(), item.value().detach());
    }
  }

  // The parameter (detached, sharing its storage) that tensor `name` of `shape` loads into, or
  // an undefined tensor for a tensor that is accepted and ignored.
  absl::StatusOr<torch::Tensor> Match(const std::string& name, c10::IntArrayRef shape) {
    auto found = parameters_.find(name);
    if (found == parameters_.end()) {
      if (IsIgnorableCheckpointTensor(name, model_)) return torch::Tensor();
      return absl::InvalidArgumentError(absl::StrCat(source_, ": unexpected tensor '", name,
                                                     "' (not a parameter of this architecture)"));
    }
    if (found->second.sizes() != shape) {
      return absl::InvalidArgumentError(absl::StrCat(source_, ": tensor '", name, "' has shape ",
                                                     c10::str(shape), ", the model config expects ",
                                                     c10::str(found->second.sizes())));
    }
    if (!matched_.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": tensor '", name, "' appears twice"));
    }
    return found->second;
  }

  // OK iff every parameter has been matched.
  absl::Status CheckAllMatched() const {
    for (const auto& [name, parameter] : parameters_) {
      if (!matched_.count(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_, ": tensor '", name, "' is missing"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const Transformer& model_;
  const std::string source_;
  std::map<std::string, torch::Tensor> parameters_;
  std::set<std::string> matched_;
};

}  // namespace

absl::Status LoadStateDict(Transformer& model, const TensorMap& tensors,
                           const std::string& source) {
  torch::NoGradGuard no_grad;
  ParameterMatcher matcher(model, source);
  for (const auto& [name, tensor] : tensors) {
    absl::StatusOr<torch::Tensor> parameter = matcher.Match(name, tensor.sizes());
    if (!parameter.ok()) return parameter.status();
    if (parameter->defined()) parameter->copy_(tensor);
  }
  return matcher.CheckAllMatched();
}

absl::StatusOr<std::shared_ptr<Transformer>> LoadModel(const std::filesystem::path& dir,
                                                       const ModelOptions& options) {
  if (absl::Status s = ValidateModelOptions(options); !s.ok()) return s;
  absl::StatusOr<ModelConfig> config = LoadConfig(dir);
  if (!config.ok()) return config.status();
  std::shared_ptr<Transformer> model;
  try {
    model = std::make_shared<Transformer>(*config, options);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat(dir.string(), ": cannot build the model: ", e.what_without_backtrace()));
  }
  // The file is read straight into the parameters (no TensorMap of copies beside them), so the
  // load peaks at the model's own size: a generator's resident memory is then its weights and
  // KV pool, not twice the weights.
  torch::NoGradGuard no_grad;
  ParameterMatcher matcher(*model, dir.string());
  absl::Status read = ReadSafetensorsDirInto(
      dir, [&](const SafetensorsEntry& entry) { return matcher.Match(entry.name, entry.shape); });
  if (!read.ok()) return read;
  if (absl::Status s = matcher.CheckAllMatched(); !s.ok()) return s;
  return model;
}

absl::Status SaveModel(const Transformer& model, const std::filesystem::path& dir,
                       int64_t max_shard_bytes) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat(dir.string(), ": cannot create: ", error.message()));
  }
  {
    std::ofstream out(dir / "config.json");
    out << ConfigToJson(model.config());
    if (!out) return absl::InternalError(absl::StrCat(dir.string(), "/config.json: write failed"));
  }
  const torch::Dtype storage = TorchDtype(model.config().torch_dtype);
  TensorMap tensors;
  for (const auto& [name, tensor] : StateDict(model)) {
    tensors[name] = tensor.detach().to(storage).contiguous();
  }
  return WriteSafetensorsDir(dir, tensors, max_shard_bytes);
}

}  // namespace lockstep
