// MoveParametersToHugePages: the weights keep their bits and shapes, sit in one 2 MiB-aligned
// block, the model computes the same and still trains; every Transformer starts with its weights
// there (and at their starting values) unless told not to.
#include "model/huge_pages.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "model/packed_batch.h"

namespace lockstep {
namespace {

ModelConfig SmallConfig() {
  ModelConfig c = *PresetConfig(Architecture::kQwen3, "tiny");
  c.num_hidden_layers = 2;
  return c;
}

ModelOptions Options(bool huge) {
  ModelOptions options;
  options.huge_page_weights = huge;
  return options;
}

bool ThpEnabled() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  return !line.empty() && line.find("[never]") == std::string::npos;
}

// [lowest, highest end) address over the parameters' data.
std::pair<uintptr_t, uintptr_t> Extent(const Transformer& model) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (const torch::Tensor& p : model.parameters()) {
    const auto begin = reinterpret_cast<uintptr_t>(p.data_ptr());
    lo = std::min(lo, begin);
    hi = std::max(hi, begin + p.nbytes());
  }
  return {lo, hi};
}

int64_t ParameterBytes(const Transformer& model) {
  int64_t bytes = 0;
  for (const torch::Tensor& p : model.parameters()) bytes += p.nbytes();
  return bytes;
}

torch::Tensor Forward(Transformer& model) {
  torch::NoGradGuard no_grad;
  absl::StatusOr<PackedBatch> batch = PackSequences({{1, 5, 9, 2}, {7, 3}});
  EXPECT_TRUE(batch.ok());
  absl::StatusOr<torch::Tensor> hidden = model.Hidden(*batch, TrainingAttention{});
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  return model.Logits(*hidden, ForwardKind::kTraining);
}

TEST(HugePagesTest, MovedWeightsKeepTheirBitsInOneAlignedBlock) {
  std::shared_ptr<Transformer> model = CreateRandomModel(SmallConfig(), 3, Options(false));
  std::map<std::string, torch::Tensor> before;
  for (const auto& item : model->named_parameters()) before[item.key()] = item.value().clone();
  const torch::Tensor logits_before = Forward(*model);

  absl::StatusOr<HugePagePlacement> placed = MoveParametersToHugePages(*model);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->bytes, ParameterBytes(*model));
  if (ThpEnabled()) {
    EXPECT_TRUE(placed->advised);
  }

  const auto [lo, hi] = Extent(*model);
  EXPECT_EQ(lo % (2 << 20), 0u);  // the block's start: the first parameter
  EXPECT_LE(hi - lo, static_cast<uintptr_t>(placed->bytes + 64 * before.size()));
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor& p = item.value();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data_ptr()) % 64, 0u) << item.key();
    EXPECT_TRUE(p.requires_grad()) << item.key();
    const torch::Tensor& old = before.at(item.key());
    ASSERT_EQ(p.sizes(), old.sizes()) << item.key();
    EXPECT_EQ(std::memcmp(p.data_ptr(), old.data_ptr(), p.nbytes()), 0) << item.key();
  }
  EXPECT_TRUE(torch::equal(Forward(*model), logits_before));
}

// The Transformer's own move (ParameterValues::kUnwritten): the same block and shapes, nothing
// copied; the values the constructor writes afterwards are what the parameters hold.
TEST(HugePagesTest, UnwrittenMovePlacesEveryParameterWithoutItsValues) {
  std::shared_ptr<Transformer> model = CreateRandomModel(SmallConfig(), 5, Options(false));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : model->named_parameters()) {
    shapes[item.key()] = item.value().sizes().vec();
  }
  absl::StatusOr<HugePagePlacement> placed =
      MoveParametersToHugePages(*model, ParameterValues::kUnwritten);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->bytes, ParameterBytes(*model));
  const auto [lo, hi] = Extent(*model);
  EXPECT_EQ(lo % (2 << 20), 0u);
  EXPECT_LE(hi - lo, static_cast<uintptr_t>(placed->bytes + 64 * shapes.size()));
  torch::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    torch::Tensor p = item.value();
    EXPECT_EQ(p.sizes().vec(), shapes.at(item.key())) << item.key();
    EXPECT_TRUE(p.requires_grad()) << item.key();
    p.fill_(0.25);
  }
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(torch::all(item.value() == 0.25).item<bool>()) << item.key();
  }
}

TEST(HugePagesTest, MovedWeightsStillTrain) {
  std::shared_ptr<Transformer> model = CreateRandomModel(SmallConfig(), 4, Options(true));
  torch::Tensor& weight = model->model->layers[0]->as<DecoderLayerImpl>()->mlp->down_proj->weight;
  const torch::Tensor start = weight.detach().clone();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  absl::StatusOr<PackedBatch> batch = PackSequences({{1, 5, 9, 2}});
  ASSERT_TRUE(batch.ok());
  absl::StatusOr<torch::Tensor> hidden = model->Hidden(*batch, TrainingAttention{});
  ASSERT_TRUE(hidden.ok());
  model->Logits(*hidden, ForwardKind::kTraining).pow(2).mean().backward();
  ASSERT_TRUE(weight.grad().defined());
  sgd.step();
  EXPECT_FALSE(torch::equal(weight.detach(), start));  // updated in place, in the block
  const auto [lo, hi] = Extent(*model);
  EXPECT_GE(reinterpret_cast<uintptr_t>(weight.data_ptr()), lo);
  EXPECT_LT(reinterpret_cast<uintptr_t>(weight.data_ptr()), hi);
}

// One block: the parameters span little more than their bytes, starting 2 MiB-aligned.
bool InOneBlock(const Transformer& model) {
  const auto [lo, hi] = Extent(model);
  return lo % (2 << 20) == 0 &&
         hi - lo <= static_cast<uintptr_t>(ParameterBytes(model) + 64 * model.parameters().size());
}

TEST(HugePagesTest, ModelsStartInTheBlockAtTheirStartingValuesUnlessToldNot) {
  for (bool huge : {true, false}) {
    Transformer model(SmallConfig(), Options(huge));
    EXPECT_EQ(InOneBlock(model), huge);
    for (const auto& item : model.named_parameters()) {
      const bool norm = item.key().find("norm.weight") != std::string::npos;
      EXPECT_TRUE(torch::equal(item.value(), torch::full_like(item.value(), norm ? 1.0 : 0.0)))
          << item.key() << " huge " << huge;
    }
  }
}

TEST(HugePagesTest, LoadModelPlacesWeightsUnlessToldNot) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("huge_pages_test_" + std::to_string(getpid()));
  std::shared_ptr<Transformer> saved = CreateRandomModel(SmallConfig(), 5, Options(false));
  ASSERT_TRUE(SaveModel(*saved, dir).ok());
  for (bool huge : {true, false}) {
    absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(dir, Options(huge));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(InOneBlock(**loaded), huge);
    EXPECT_TRUE(torch::equal(Forward(**loaded), Forward(*saved))) << huge;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep
