// LoadModel's peak memory: a checkpoint is read straight into the model's parameters, so loading
// a model costs its own size once, not a TensorMap of copies (plus the mapped file) beside it.
// CTest runs each case in its own process; the peak is measured with /proc/self/status VmHWM,
// reset first through /proc/self/clear_refs.
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "model/checkpoint.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

double StatusMib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream fields(line.substr(field.size() + 1));
      double kib = 0;
      fields >> kib;
      return kib / 1024.0;
    }
  }
  return -1;
}

// A Qwen3 of ~27M parameters (~104 MiB in fp32): large enough that a second copy of the weights
// stands far above allocator noise.
ModelConfig MediumConfig() {
  ModelConfig c = *PresetConfig(Architecture::kQwen3, "tiny");
  c.vocab_size = 4096, c.hidden_size = 512, c.intermediate_size = 1536;
  c.num_hidden_layers = 8, c.num_attention_heads = 8, c.num_key_value_heads = 4, c.head_dim = 64;
  return c;
}

TEST(LoadModelMemoryTest, PeakIsTheWeightsOnce) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("load_model_memory_" + std::to_string(::getpid()));
  const ModelConfig config = MediumConfig();
  TensorMap original;
  {
    std::shared_ptr<Transformer> model = CreateRandomModel(config, /*seed=*/3);
    ASSERT_TRUE(SaveModel(*model, dir).ok());
    for (const auto& [name, tensor] : StateDict(*model)) {
      original[name] = tensor.sum().unsqueeze(0);  // a fingerprint, not a copy
    }
  }
  const double weights_mib = config.NumParameters() * sizeof(float) / (1024.0 * 1024.0);
  ASSERT_GT(weights_mib, 90);
  malloc_trim(0);  // hand the created model's freed heap back, so the load cannot reuse it
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // VmHWM := VmRSS
  }
  const double before = StatusMib("VmRSS");
  ASSERT_GT(before, 0);
  absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const double growth = StatusMib("VmHWM") - before;
  std::printf("LoadModel of %.1f MiB of weights: peak grew by %.1f MiB\n", weights_mib, growth);
  // Once the weights, plus one 8 MiB copy chunk and allocator slack; a TensorMap beside the
  // model would be twice the weights.
  EXPECT_LT(growth, 1.1 * weights_mib + 16) << "weights " << weights_mib << " MiB";
  EXPECT_GT(growth, 0.9 * weights_mib);  // the measurement sees the weights at all
  for (const auto& [name, tensor] : StateDict(**loaded)) {
    EXPECT_TRUE(torch::allclose(tensor.sum().unsqueeze(0), original.at(name))) << name;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lockstep
