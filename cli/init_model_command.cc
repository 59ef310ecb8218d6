// `lockstep init-model`: writes a randomly initialised model in Hugging Face layout.
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "cli/commands.h"
#include "cli/cli_util.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/tokenizer/byte_tokenizer_writer.h"

namespace lockstep::cli {
namespace {

struct InitModelFlags {
  std::string architecture = "qwen3";
  std::string preset = "tiny";
  std::string out;
  uint64_t seed = 0;
  std::string dtype = "float32";
};

absl::Status RunInitModel(const InitModelFlags& flags) {
  absl::StatusOr<Architecture> architecture = ParseArchitectureName(flags.architecture);
  if (!architecture.ok()) return architecture.status();
  absl::StatusOr<ModelConfig> config = PresetConfig(*architecture, flags.preset);
  if (!config.ok()) return config.status();
  if (flags.dtype == "bfloat16") {
    config->torch_dtype = StorageDtype::kBFloat16;
  } else if (flags.dtype == "float16") {
    config->torch_dtype = StorageDtype::kFloat16;
  } else if (flags.dtype != "float32") {
    return absl::InvalidArgumentError("--dtype must be float32, bfloat16 or float16");
  }
  std::shared_ptr<Transformer> model = CreateRandomModel(*config, flags.seed);
  if (absl::Status s = SaveModel(*model, flags.out); !s.ok()) return s;
  // TOKENIZER HOOK: the byte-level tokenizer files are written here.
  if (absl::Status s = WriteByteLevelTokenizerFiles(flags.out); !s.ok()) return s;
  std::printf("wrote %s model '%s' (%.2fM parameters, seed %llu) to %s\n",
              flags.architecture.c_str(), flags.preset.c_str(),
              static_cast<double>(config->NumParameters()) / 1e6,
              static_cast<unsigned long long>(flags.seed), flags.out.c_str());
  return absl::OkStatus();
}

}  // namespace

void AddInitModelCommand(CLI::App& app) {
  auto flags = std::make_shared<InitModelFlags>();
  CLI::App* command =
      app.add_subcommand("init-model", "Write a randomly initialised model (Hugging Face layout)");
  command->add_option("--arch", flags->architecture, "Architecture")
      ->check(CLI::IsMember({"qwen3", "llama", "qwen3_moe"}))
      ->capture_default_str();
  command->add_option("--preset", flags->preset, "Size: tiny (~1M), small (~10M), base (~100M)")
      ->check(CLI::IsMember({"tiny", "small", "base"}))
      ->capture_default_str();
  command->add_option("--out", flags->out, "Output directory")->required();
  command->add_option("--seed", flags->seed, "Initialisation seed")->capture_default_str();
  command->add_option("--dtype", flags->dtype, "Storage dtype of the weights")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}))
      ->capture_default_str();
  command->callback([flags] { ExitOnError(RunInitModel(*flags)); });
}

}  // namespace lockstep::cli
