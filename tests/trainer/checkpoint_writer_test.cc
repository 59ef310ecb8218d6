// Background checkpoints (trainer/checkpoint_writer.h): a background save holds the state as it
// was when the call returned, whatever the trainer does next; saves in a row are written one
// after the other; the next step reports the blocking and write times; a failed write surfaces;
// the snapshot buffers exist (pages touched) before the first save, so it allocates nothing.
#include "trainer/checkpoint_writer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/trainer.h"

namespace lockstep::trainer {
namespace {

namespace fs = std::filesystem;
using testing::BitEqual;
using testing::CloneMap;
using testing::RandomRollouts;
using testing::TinyModel;

class CheckpointWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lockstep_ckpt_writer_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<Trainer> MakeTrainer() {
    TrainerOptions options;
    options.lr = 1e-3;
    options.checkpoint_dir = root_.string();
    options.keep_last = 0;
    absl::StatusOr<std::unique_ptr<Trainer>> t =
        Trainer::Create(TinyModel(23, NumericMode::kFast), options);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }

  fs::path root_;
};

TEST_F(CheckpointWriterTest, ABackgroundSaveHoldsTheStateOfItsCallNotOfLaterSteps) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(1, 3, 0)).ok());
  const TensorMap weights_at_save = CloneMap(trainer->Parameters());
  const TensorMap optimizer_at_save = CloneMap(trainer->OptimizerState());
  absl::StatusOr<std::string> dir = trainer->SaveCheckpoint("c1", /*background=*/true);
  ASSERT_TRUE(dir.ok()) << dir.status();
  // Two more steps change the weights in place while the write may still run.
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(2, 3, 1)).ok());
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(3, 3, 2)).ok());
  ASSERT_FALSE(BitEqual(weights_at_save, trainer->Parameters()));
  ASSERT_TRUE(trainer->WaitForCheckpoint().ok());

  std::unique_ptr<Trainer> fresh = MakeTrainer();
  absl::Status s = fresh->LoadCheckpoint(*dir);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fresh->step(), 1);
  EXPECT_EQ(fresh->data_cursor(), "c1");
  EXPECT_TRUE(BitEqual(weights_at_save, fresh->Parameters()));
  EXPECT_TRUE(BitEqual(optimizer_at_save, fresh->OptimizerState()));
}

TEST_F(CheckpointWriterTest, SavesInARowAreWrittenInOrderAndStepsReportTheirTimes) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  std::vector<TensorMap> saved;
  for (int64_t i = 0; i < 3; ++i) {
    absl::StatusOr<StepMetrics> step = trainer->TrainStep(RandomRollouts(10 + i, 3, i));
    ASSERT_TRUE(step.ok()) << step.status();
    // The step after a background save reports how long that save held the trainer.
    EXPECT_EQ(step->checkpoint_blocking_ms.has_value(), i > 0) << i;
    if (i > 0) {
      EXPECT_GE(*step->checkpoint_blocking_ms, 0.0);
    }
    saved.push_back(CloneMap(trainer->Parameters()));
    ASSERT_TRUE(trainer->SaveCheckpoint("c" + std::to_string(i), /*background=*/true).ok());
    EXPECT_LE(trainer->last_checkpoint_times().copy_ms,
              trainer->last_checkpoint_times().blocking_ms);
    EXPECT_FALSE(trainer->last_checkpoint_times().write_ms.has_value());
  }
  // The last save waits for its write: every step directory is complete and holds its state.
  ASSERT_TRUE(trainer->SaveCheckpoint("c3").ok());
  ASSERT_TRUE(trainer->last_checkpoint_times().write_ms.has_value());
  EXPECT_GT(*trainer->last_checkpoint_times().write_ms, 0.0);
  EXPECT_FALSE(fs::exists(root_ / "step_000003.tmp"));
  for (int64_t i = 0; i < 3; ++i) {
    const fs::path dir = root_ / CheckpointManager::StepDirName(i + 1);
    ASSERT_TRUE(CheckpointManager::Verify(dir).ok()) << dir;
    std::unique_ptr<Trainer> fresh = MakeTrainer();
    ASSERT_TRUE(fresh->LoadCheckpoint(dir.string()).ok());
    EXPECT_TRUE(BitEqual(saved[i], fresh->Parameters())) << dir;
  }
}

TEST_F(CheckpointWriterTest, AStepReportsTheWriteThatFinishedBeforeIt) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(1, 3, 0)).ok());
  ASSERT_TRUE(trainer->SaveCheckpoint("c", /*background=*/true).ok());
  ASSERT_TRUE(trainer->WaitForCheckpoint().ok());
  absl::StatusOr<StepMetrics> step = trainer->TrainStep(RandomRollouts(2, 3, 1));
  ASSERT_TRUE(step.ok());
  ASSERT_TRUE(step->checkpoint_write_ms.has_value());
  EXPECT_GT(*step->checkpoint_write_ms, 0.0);
  // Reported once.
  step = trainer->TrainStep(RandomRollouts(3, 3, 2));
  ASSERT_TRUE(step.ok());
  EXPECT_FALSE(step->checkpoint_write_ms.has_value());
  EXPECT_FALSE(step->checkpoint_blocking_ms.has_value());
}

TEST_F(CheckpointWriterTest, AFailedBackgroundWriteIsReturnedByTheNextSave) {
  // The root is a file: the write cannot create its directory.
  std::ofstream(root_) << "not a directory";
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(1, 3, 0)).ok());
  ASSERT_TRUE(trainer->SaveCheckpoint("c", /*background=*/true).ok());
  absl::Status next = trainer->SaveCheckpoint("d", /*background=*/true).status();
  EXPECT_FALSE(next.ok());
  EXPECT_NE(std::string(next.message()).find(root_.string()), std::string::npos) << next;
  fs::remove(root_);
}

// Minor page faults of the calling thread so far (a first write into fresh memory faults).
int64_t ThreadMinorFaults() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

TEST_F(CheckpointWriterTest, TheFirstSaveCopiesIntoBuffersReservedByCreate) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(1, 3, 0)).ok());
  const TensorMap weights_at_save = CloneMap(trainer->Parameters());
  absl::StatusOr<std::string> dir = trainer->SaveCheckpoint("c1", /*background=*/true);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(trainer->last_checkpoint_times().allocated_bytes, 0);
  ASSERT_TRUE(trainer->WaitForCheckpoint().ok());
  std::unique_ptr<Trainer> fresh = MakeTrainer();
  ASSERT_TRUE(fresh->LoadCheckpoint(*dir).ok());
  EXPECT_TRUE(BitEqual(weights_at_save, fresh->Parameters()));
}

TEST_F(CheckpointWriterTest, ReservedBuffersAreTouchedBeforeTheFirstSaveAndNeverOverwriteIt) {
  // The weights of a tiny model and an 8 MiB extra tensor (2048 pages of 4 KiB).
  std::shared_ptr<Transformer> model = TinyModel(5, NumericMode::kFast);
  const TensorMap weights = StateDict(*model);
  CheckpointPayload payload;
  payload.extra["big"] = torch::rand({2 * 1024 * 1024});
  payload.trainer_state = "{}";
  int64_t state_bytes = 0;
  for (const auto& [name, t] : weights) state_bytes += static_cast<int64_t>(t.nbytes());
  state_bytes += static_cast<int64_t>(payload.extra["big"].nbytes());

  {  // Without Reserve the first save allocates the whole snapshot, the second nothing.
    CheckpointWriter writer(CheckpointManager(root_ / "plain", 0));
    absl::StatusOr<CheckpointSubmitted> first = writer.Save(1, model->config(), weights, payload);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->allocated_bytes, state_bytes);
    ASSERT_TRUE(writer.Wait().ok());
    absl::StatusOr<CheckpointSubmitted> second = writer.Save(2, model->config(), weights, payload);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->allocated_bytes, 0);
  }

  CheckpointWriter writer(CheckpointManager(root_ / "reserved", 0));
  writer.Reserve(weights, payload);
  // Saved at once: the save waits for the writer thread's touching, which never lands on top
  // of the copy (the checkpoint holds the values, not zeros).
  const int64_t faults_before = ThreadMinorFaults();
  absl::StatusOr<CheckpointSubmitted> first = writer.Save(1, model->config(), weights, payload);
  const int64_t faults = ThreadMinorFaults() - faults_before;
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->allocated_bytes, 0);
  // The copy wrote 8 MiB into pages the writer thread had already faulted in (fresh pages
  // would cost up to 2048 faults; pooled ones fewer); a few faults of small heap allocations
  // remain.
  EXPECT_LT(faults, 64) << "the first save faulted in its snapshot's pages";
  ASSERT_TRUE(writer.Wait().ok());
  absl::StatusOr<LoadedCheckpoint> loaded = CheckpointManager::Load(first->dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(BitEqual(weights, loaded->model));
  EXPECT_TRUE(BitEqual(payload.extra, loaded->payload.extra));
}

// SaveReserved copies the reserved tensors' values at the call (not at Reserve, not later) and
// writes the trainer state its renderer returns, rendered on the writer thread.
TEST_F(CheckpointWriterTest, ASaveOfTheReservedTensorsHoldsTheirValuesAtTheCall) {
  std::shared_ptr<Transformer> model = TinyModel(7, NumericMode::kFast);
  const TensorMap weights = StateDict(*model);
  CheckpointPayload payload;
  payload.optimizer["step"] = torch::zeros({1}, torch::kInt64);
  CheckpointWriter writer(CheckpointManager(root_ / "reserved", 0));
  absl::StatusOr<CheckpointSubmitted> early = writer.SaveReserved(1, model->config(), [] {
    return std::string("{}");
  });
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);

  writer.Reserve(weights, payload);
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : weights) tensor.add_(1.0f);
  }
  payload.optimizer["step"].fill_(5);
  const TensorMap at_save = CloneMap(weights);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id renderer;
  absl::StatusOr<CheckpointSubmitted> saved =
      writer.SaveReserved(2, model->config(), [&renderer] {
        renderer = std::this_thread::get_id();
        return std::string("{\"rendered\": true}");
      });
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->allocated_bytes, 0);
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : weights) tensor.add_(1.0f);  // after the call: not saved
  }
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_NE(renderer, caller);
  absl::StatusOr<LoadedCheckpoint> loaded = CheckpointManager::Load(saved->dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(BitEqual(at_save, loaded->model));
  EXPECT_EQ(loaded->payload.optimizer.at("step").item<int64_t>(), 5);
  EXPECT_EQ(loaded->payload.trainer_state, "{\"rendered\": true}");
}

}  // namespace
}  // namespace lockstep::trainer
