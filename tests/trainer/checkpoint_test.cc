// Checkpoints: layout loadable as a Hugging Face model folder, round trip of the whole trainer
// state, keep-last-K, latest valid step, and clear errors for flipped, truncated, missing files.
#include "model/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/checkpoint_manager.h"

namespace lockstep::trainer {
namespace {

namespace fs = std::filesystem;
using testing::BitEqual;
using testing::CloneMap;
using testing::RandomRollouts;
using testing::TinyModel;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lockstep_ckpt_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<Trainer> MakeTrainer(int64_t keep_last = 3) {
    TrainerOptions options;
    options.lr = 1e-3;
    options.checkpoint_dir = root_.string();
    options.keep_last = keep_last;
    options.kl_coef = 0.05;  // the reference weights travel in the checkpoint too
    absl::StatusOr<std::unique_ptr<Trainer>> t =
        Trainer::Create(TinyModel(17, NumericMode::kFast), options);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }

  // Trains one step and saves; returns the step directory.
  fs::path StepAndSave(Trainer& trainer, const std::string& cursor) {
    EXPECT_TRUE(
        trainer.TrainStep(RandomRollouts(trainer.step(), 3, trainer.weight_version())).ok());
    absl::StatusOr<std::string> dir = trainer.SaveCheckpoint(cursor);
    EXPECT_TRUE(dir.ok()) << dir.status();
    return dir.ok() ? fs::path(*dir) : fs::path();
  }

  fs::path root_;
};

void FlipByte(const fs::path& file, int64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x10));
}

TEST_F(CheckpointTest, HoldsAHuggingFaceModelFolderAndAManifest) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  const fs::path dir = StepAndSave(*trainer, "cursor-1");
  EXPECT_EQ(dir.filename(), "step_000001");
  for (const char* name : {"config.json", "model.safetensors", "optimizer.safetensors",
                           "extra.safetensors", "trainer_state.json", "manifest.json"}) {
    EXPECT_TRUE(fs::exists(dir / name)) << name;
  }
  EXPECT_FALSE(fs::exists(root_ / "step_000001.tmp"));
  absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(BitEqual(StateDict(**loaded), trainer->Parameters()));
  std::ifstream in(dir / "manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(in);
  absl::StatusOr<std::string> sha = Sha256File(dir / "model.safetensors");
  ASSERT_TRUE(sha.ok());
  EXPECT_EQ(manifest["files"]["model.safetensors"]["sha256"], *sha);
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(CheckpointTest, LoadRestoresTheWholeTrainerState) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  const fs::path dir = StepAndSave(*trainer, "epoch=0,index=7");
  const TensorMap weights = CloneMap(trainer->Parameters());
  const TensorMap optimizer = CloneMap(trainer->OptimizerState());
  std::unique_ptr<Trainer> fresh = MakeTrainer();
  ASSERT_TRUE(fresh->LoadCheckpoint(dir.string()).ok());
  EXPECT_EQ(fresh->step(), 1);
  EXPECT_EQ(fresh->weight_version(), 1);
  EXPECT_EQ(fresh->data_cursor(), "epoch=0,index=7");
  EXPECT_EQ(fresh->resumed_from(), dir.string());
  EXPECT_TRUE(BitEqual(weights, fresh->Parameters()));
  EXPECT_TRUE(BitEqual(optimizer, fresh->OptimizerState()));
  // Both continue identically (the KL reference came back too).
  std::vector<Rollout> next = RandomRollouts(50, 3, 1);
  absl::StatusOr<StepMetrics> a = trainer->TrainStep(next);
  absl::StatusOr<StepMetrics> b = fresh->TrainStep(next);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->loss, b->loss);
  EXPECT_EQ(a->kl, b->kl);
  EXPECT_TRUE(BitEqual(trainer->Parameters(), fresh->Parameters()));
}

TEST_F(CheckpointTest, KeepsTheLastKAndTheRootLoadsTheNewestValidStep) {
  std::unique_ptr<Trainer> trainer = MakeTrainer(/*keep_last=*/2);
  for (int i = 1; i <= 3; ++i) StepAndSave(*trainer, "c" + std::to_string(i));
  CheckpointManager manager(root_, 2);
  std::vector<fs::path> steps = manager.ListSteps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].filename(), "step_000002");
  EXPECT_EQ(steps[1].filename(), "step_000003");
  // A torn write of step 4 (no manifest) and a corrupted step 3: the root resolves to step 2.
  fs::create_directories(root_ / "step_000004");
  FlipByte(root_ / "step_000003" / "model.safetensors", 200);
  std::unique_ptr<Trainer> fresh = MakeTrainer();
  absl::Status s = fresh->LoadCheckpoint(root_.string());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fresh->step(), 2);
  EXPECT_EQ(fresh->data_cursor(), "c2");
  EXPECT_EQ(fresh->resumed_from(), (root_ / "step_000002").string());
}

TEST_F(CheckpointTest, CorruptionIsDetectedAndNamesTheFile) {
  struct Case {
    const char* file;
    std::function<void(const fs::path&)> damage;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"model.safetensors", [](const fs::path& f) { FlipByte(f, 1000); }, "SHA-256"},
      {"optimizer.safetensors", [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) - 7); },
       "truncated"},
      {"trainer_state.json", [](const fs::path& f) { fs::remove(f); }, "missing"},
      {"manifest.json", [](const fs::path& f) { fs::remove(f); }, "missing"},
      {"config.json", [](const fs::path& f) { FlipByte(f, 3); }, "SHA-256"},
  };
  for (const Case& c : cases) {
    fs::remove_all(root_);
    std::unique_ptr<Trainer> trainer = MakeTrainer();
    const fs::path dir = StepAndSave(*trainer, "x");
    c.damage(dir / c.file);
    std::unique_ptr<Trainer> fresh = MakeTrainer();
    const TensorMap before = CloneMap(fresh->Parameters());
    absl::Status s = fresh->LoadCheckpoint(dir.string());
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.file << ": " << s;
    EXPECT_NE(s.message().find(c.file), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s;
    EXPECT_EQ(fresh->step(), 0);
    EXPECT_TRUE(BitEqual(before, fresh->Parameters()));
    // The root has no other step: nothing valid to load.
    EXPECT_EQ(fresh->LoadCheckpoint(root_.string()).code(), absl::StatusCode::kNotFound);
  }
}

TEST_F(CheckpointTest, SaveWithoutADirectoryFails) {
  TrainerOptions options;
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::Create(TinyModel(2, NumericMode::kFast), options);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->SaveCheckpoint("").status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace lockstep::trainer
