// Test driver for resume exactness, run as a child process by resume_test.cc:
//
//   trainer_resume_driver CHECKPOINT_ROOT NUM_STEPS [RESUME_FROM]
//
// Builds the tiny model and a trainer (AdamW with weight decay, warm-up + cosine, clipping, KL
// reference), optionally resumes from RESUME_FROM, runs NUM_STEPS train steps whose batches
// depend only on the step index, and saves a checkpoint with cursor "after=<step>".
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/trainer/trainer_test_util.h"

int main(int argc, char** argv) {
  using namespace lockstep;
  using namespace lockstep::trainer;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_ROOT NUM_STEPS [RESUME_FROM]\n", argv[0]);
    return 2;
  }
  torch::set_num_threads(1);
  TrainerOptions options;
  options.lr = 2e-3;
  options.weight_decay = 0.01;
  options.schedule = ScheduleKind::kCosine;
  options.warmup_steps = 2;
  options.total_steps = 6;
  options.grad_clip = 0.5;
  options.kl_coef = 0.02;
  options.micro_batch_tokens = 32;
  options.checkpoint_dir = argv[1];
  options.seed = 99;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(testing::TinyModel(31, NumericMode::kFast), options);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(trainer.status().message()).c_str());
    return 1;
  }
  if (argc > 3) {
    absl::Status s = (*trainer)->LoadCheckpoint(argv[3]);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("resumed at step %lld cursor %s\n", static_cast<long long>((*trainer)->step()),
                (*trainer)->data_cursor().c_str());
  }
  const int64_t steps = std::atoll(argv[2]);
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t step = (*trainer)->step();
    // Half the batch on-policy, half one version stale (when there is an older version).
    std::vector<Rollout> batch =
        testing::RandomRollouts(1000 + step, 6, (*trainer)->weight_version());
    for (size_t r = 0; r < batch.size(); r += 2) {
      for (int64_t& v : batch[r].weight_versions) v = std::max<int64_t>(0, v - 1);
    }
    absl::StatusOr<StepMetrics> m = (*trainer)->TrainStep(batch);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", std::string(m.status().message()).c_str());
      return 1;
    }
    std::printf("step %lld loss %.9g grad_norm %.9g\n", static_cast<long long>(m->step), m->loss,
                m->grad_norm);
  }
  absl::StatusOr<std::string> dir =
      (*trainer)->SaveCheckpoint("after=" + std::to_string((*trainer)->step()));
  if (!dir.ok()) {
    std::fprintf(stderr, "%s\n", std::string(dir.status().message()).c_str());
    return 1;
  }
  std::printf("saved %s\n", dir->c_str());
  return 0;
}
