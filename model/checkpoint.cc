#include "model/checkpoint.h"

#include <cmath>
#include <fstream>
#include <map>
#include <set>

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

absl::Status LoadStateDict(Transformer& model, const TensorMap& tensors,
                           const std::string& source) {
  torch::NoGradGuard no_grad;
  std::set<std::string> expected;
  for (auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    expected.insert(name);
    auto found = tensors.find(name);
    if (found == tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": tensor '", name, "' is missing"));
    }
    torch::Tensor& p = item.value();
    if (found->second.sizes() != p.sizes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": tensor '", name, "' has shape ", c10::str(found->second.sizes()),
                       ", the model config expects ", c10::str(p.sizes())));
    }
    p.copy_(found->second);
  }
  for (const auto& [name, tensor] : tensors) {
    if (!expected.count(name) && !IsIgnorableCheckpointTensor(name, model)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": unexpected tensor '", name,
                                                     "' (not a parameter of this architecture)"));
    }
  }
  return absl::OkStatus();
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
  std::map<std::string, torch::Tensor> parameters;
  for (const auto& item : model->named_parameters()) {
    parameters.emplace(item.key(), item.value().detach());
  }
  std::set<std::string> loaded;
  const std::string source = dir.string();
  absl::Status read = ReadSafetensorsDirInto(
      dir, [&](const SafetensorsEntry& entry) -> absl::StatusOr<torch::Tensor> {
        auto found = parameters.find(entry.name);
        if (found == parameters.end()) {
          if (IsIgnorableCheckpointTensor(entry.name, *model)) return torch::Tensor();
          return absl::InvalidArgumentError(
              absl::StrCat(source, ": unexpected tensor '", entry.name,
                           "' (not a parameter of this architecture)"));
        }
        if (found->second.sizes().vec() != entry.shape) {
          return absl::InvalidArgumentError(
              absl::StrCat(source, ": tensor '", entry.name, "' has shape ",
                           c10::str(c10::IntArrayRef(entry.shape)), ", the model config expects ",
                           c10::str(found->second.sizes())));
        }
        if (!loaded.insert(entry.name).second) {
          return absl::InvalidArgumentError(
              absl::StrCat(source, ": tensor '", entry.name, "' appears twice"));
        }
        return found->second;
      });
  if (!read.ok()) return read;
  for (const auto& [name, parameter] : parameters) {
    if (!loaded.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": tensor '", name, "' is missing"));
    }
  }
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
