// Trainer checkpoints (trainer.h): what a checkpoint holds, the background writer whose
// snapshot buffers are reserved when the trainer is created, saving and loading.
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"
#include "trainer/checkpoint_manager.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/optimizer.h"
#include "trainer/trainer.h"

namespace lockstep::trainer {
namespace {

constexpr char kReferencePrefix[] = "reference.";

std::string ToHex(const torch::Tensor& bytes) {
  static const char* digits = "0123456789abcdef";
  torch::Tensor b = bytes.contiguous();
  const uint8_t* p = b.data_ptr<uint8_t>();
  std::string out;
  for (int64_t i = 0; i < b.numel(); ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

absl::StatusOr<torch::Tensor> FromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) return absl::DataLossError("rng_state: odd hex length");
  torch::Tensor out = torch::empty({static_cast<int64_t>(hex.size() / 2)}, torch::kUInt8);
  uint8_t* p = out.data_ptr<uint8_t>();
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return absl::DataLossError("rng_state: not lower-case hex");
    p[i / 2] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return out;
}

// trainer_state.json: step, weight version, data cursor, RNG state, options.
std::string TrainerStateJson(int64_t step, int64_t weight_version, const std::string& data_cursor,
                             const torch::Tensor& rng_state, const std::string& options_json) {
  nlohmann::json state;
  state["step"] = step;
  state["weight_version"] = weight_version;
  state["data_cursor"] = data_cursor;
  state["rng_state"] = ToHex(rng_state);
  state["options"] = nlohmann::json::parse(options_json);
  return state.dump(2);
}

}  // namespace

void Trainer::StartCheckpointWriter() {
  checkpoint_writer_ = std::make_unique<CheckpointWriter>(
      CheckpointManager(options_.checkpoint_dir, options_.keep_last, options_.tokenizer_dir));
  options_json_ = TrainerOptionsToJson(options_);
  // The state's tensors and shapes never change (LoadCheckpoint and AdamW copy into the same
  // tensors), so the buffers reserved now, each paired with its tensor, serve every save; the
  // first one included (checkpoint_writer.h).
  checkpoint_writer_->Reserve(Parameters(), CheckpointTensors());
}

CheckpointPayload Trainer::CheckpointTensors() const {
  CheckpointPayload payload;
  payload.optimizer = optimizer_->StateDict();
  if (reference_ != nullptr) {
    for (const auto& [name, tensor] : StateDict(*reference_)) {
      payload.extra[kReferencePrefix + name] = tensor;
    }
  }
  return payload;
}

absl::StatusOr<std::string> Trainer::SaveCheckpoint(const std::string& data_cursor,
                                                    bool background) {
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("SaveCheckpoint: trainer options have no checkpoint_dir");
  }
  const auto start = std::chrono::steady_clock::now();
  // What the JSON needs, owned by the renderer (it runs on the writer thread): the blocking
  // path is the copy of the tensors paired at Create and these few values.
  CheckpointWriter::TrainerStateRenderer render =
      [step = step_, version = weight_version_, cursor = data_cursor,
       rng_state = generator_.get_state(), options_json = options_json_] {
        return TrainerStateJson(step, version, cursor, rng_state, options_json);
      };
  absl::StatusOr<CheckpointSubmitted> submitted =
      checkpoint_writer_->SaveReserved(step_, model_->config(), std::move(render));
  if (!submitted.ok()) return submitted.status();
  // The whole call so far: the renderer's values, the wait for an earlier write, the copy.
  const double blocking_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  last_checkpoint_times_ = CheckpointTimes{blocking_ms, submitted->copy_ms, std::nullopt,
                                          submitted->allocated_bytes};
  unreported_blocking_ms_ = blocking_ms;
  if (!background) {
    if (absl::Status s = checkpoint_writer_->Wait(); !s.ok()) return s;
    if (std::optional<CheckpointWritten> written = checkpoint_writer_->TakeFinished()) {
      last_checkpoint_times_.write_ms = written->write_ms;
    }
  }
  data_cursor_ = data_cursor;
  return submitted->dir.string();
}

absl::Status Trainer::WaitForCheckpoint() {
  return checkpoint_writer_ == nullptr ? absl::OkStatus() : checkpoint_writer_->Wait();
}

absl::Status Trainer::LoadCheckpoint(const std::string& path) {
  absl::StatusOr<LoadedCheckpoint> loaded = CheckpointManager::Load(path);
  if (!loaded.ok()) return loaded.status();
  const std::string source = loaded->dir.string();
  // Parse and check everything before changing anything.
  nlohmann::json state =
      nlohmann::json::parse(loaded->payload.trainer_state, nullptr, /*allow_exceptions=*/false);
  int64_t step = 0, version = 0;
  std::string cursor;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options_.seed);
  try {
    step = state.at("step").get<int64_t>();
    version = state.at("weight_version").get<int64_t>();
    cursor = state.at("data_cursor").get<std::string>();
    absl::StatusOr<torch::Tensor> bytes = FromHex(state.at("rng_state").get<std::string>());
    if (!bytes.ok()) {
      return absl::DataLossError(
          absl::StrCat(source, "/", kTrainerStateFileName, ": ", bytes.status().message()));
    }
    generator.set_state(*bytes);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(
        absl::StrCat(source, "/", kTrainerStateFileName, ": malformed: ", e.what()));
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat(source, "/", kTrainerStateFileName,
                                            ": rng_state rejected: ", e.what_without_backtrace()));
  }
  const bool tied = model_->config().tie_word_embeddings;
  const auto model_parameters = model_->named_parameters();
  for (const auto& [name, tensor] : loaded->model) {
    if (!model_parameters.contains(name) && !(tied && name == "lm_head.weight")) {
      return absl::InvalidArgumentError(absl::StrCat(source, "/model.safetensors: tensor '", name,
                                                     "' is not a parameter of the model"));
    }
  }
  for (const auto& item : model_parameters) {
    auto it = loaded->model.find(item.key());
    if (it == loaded->model.end() || !it->second.sizes().equals(item.value().sizes())) {
      return absl::InvalidArgumentError(absl::StrCat(source, "/model.safetensors: tensor '",
                                                     item.key(),
                                                     "' is missing or has the wrong shape"));
    }
  }
  TensorMap reference;
  if (reference_ != nullptr) {
    for (const auto& [name, tensor] : loaded->payload.extra) {
      if (name.rfind(kReferencePrefix, 0) == 0) {
        reference[name.substr(std::strlen(kReferencePrefix))] = tensor;
      }
    }
    for (const auto& item : reference_->named_parameters()) {
      auto it = reference.find(item.key());
      if (it == reference.end() || !it->second.sizes().equals(item.value().sizes())) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, "/", kExtraTensorsFileName, ": KL reference tensor '", item.key(),
            "' is missing or has the wrong shape (kl_coef > 0 needs the reference weights)"));
      }
    }
  }
  // The optimizer checks its whole state before changing anything.
  if (absl::Status s = optimizer_->LoadStateDict(loaded->payload.optimizer); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, "/", kOptimizerFileName, ": ", s.message()));
  }
  if (absl::Status s = LoadStateDict(*model_, loaded->model, source); !s.ok()) return s;
  if (reference_ != nullptr) {
    if (absl::Status s = LoadStateDict(*reference_, reference, source); !s.ok()) return s;
  }
  generator_ = std::move(generator);
  step_ = step;
  weight_version_ = version;
  data_cursor_ = cursor;
  resumed_from_ = source;
  return absl::OkStatus();
}

}  // namespace lockstep::trainer
