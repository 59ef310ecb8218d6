// The RL loop against fake trainer and generator services on loopback (no model): admission
// control keeps every sample within max_staleness, batches are trained in admission order with
// group advantages, failed reward items are excluded and counted, strict parity stops the loop
// with the position and both values, and the data cursor resumes the prompt stream exactly.
#include "orchestrator/rl_loop.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "orchestrator/config.h"
#include "orchestrator/job.h"
#include "proto/generator.grpc.pb.h"
#include "proto/trainer.grpc.pb.h"
#include "rewards/local_reward_scorer.h"
#include "rewards/reward_registry.h"
#include "tests/orchestrator/loop_test_services.h"

namespace lockstep::orchestrator {
namespace {

constexpr int64_t kEos = kLoopTestEos;

// Answers every prompt "a+b=" with "a+b" (correct) for even sample indices and "0" otherwise,
// each token stamped with the version it last received.
class FakeGenerator final : public v1::Generator::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    std::string prompt;
    for (int64_t id : request->prompt_token_ids()) prompt.push_back(static_cast<char>(id));
    const int a = prompt[0] - '0', b = prompt[2] - '0';
    const int64_t version = version_.load();
    for (int64_t k = 0; k < request->n(); ++k) {
      v1::GenerateResponse response;
      response.set_sample_index(k);
      const std::string text = k % 2 == 0 ? std::to_string(a + b) : "0";
      for (char c : text) response.add_token_ids(c);
      response.add_token_ids(kEos);
      for (int t = 0; t < response.token_ids_size(); ++t) {
        response.add_logprobs(-0.25f * (t + 1));
        response.add_weight_versions(version);
      }
      writer->Write(response);
    }
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                         v1::GetStatusResponse* response) override {
    response->set_weight_version(version_.load());
    return grpc::Status::OK;
  }
  grpc::Status JoinWeightSync(grpc::ServerContext*, const v1::JoinWeightSyncRequest*,
                              v1::JoinWeightSyncResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status ReceiveWeights(grpc::ServerContext*, const v1::ReceiveWeightsRequest* request,
                              v1::WeightSyncResponse* response) override {
    version_.store(request->version());
    response->set_version(request->version());
    return grpc::Status::OK;
  }

 private:
  std::atomic<int64_t> version_{0};
};

// Records every TrainStep; reports parity for tokens of its own version; can report a mismatch.
class FakeTrainer final : public v1::Trainer::Service {
 public:
  explicit FakeTrainer(int64_t mismatch_at_step = -1) : mismatch_at_step_(mismatch_at_step) {}

  grpc::Status TrainStep(grpc::ServerContext*, const v1::TrainStepRequest* request,
                         v1::TrainStepResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    batches_.push_back(*request);
    versions_before_.push_back(version_);
    v1::ParityStats* parity = response->mutable_metrics()->mutable_parity();
    for (const v1::Rollout& rollout : request->rollouts()) {
      for (int64_t v : rollout.weight_versions()) {
        if (v == version_) parity->set_tokens_compared(parity->tokens_compared() + 1);
      }
    }
    if (step_ == mismatch_at_step_) {
      parity->set_tokens_mismatched(1);
      parity->set_has_mismatch(true);
      parity->set_mismatch_rollout(1);
      parity->set_mismatch_position(0);
      parity->set_mismatch_trainer_logprob(-0.5f);
      parity->set_mismatch_generator_logprob(-0.25f);
    }
    ++step_;
    ++version_;
    response->mutable_metrics()->set_step(step_);
    response->mutable_metrics()->set_weight_version(version_);
    response->mutable_metrics()->set_tokens(10);
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::TrainerStatusRequest*,
                         v1::TrainerStatusResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_weight_version(version_);
    response->set_step(step_);
    return grpc::Status::OK;
  }
  grpc::Status JoinWeightSync(grpc::ServerContext*, const v1::JoinWeightSyncRequest*,
                              v1::JoinWeightSyncResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status PublishWeights(grpc::ServerContext*, const v1::PublishWeightsRequest* request,
                              v1::WeightSyncResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (request->version() != version_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "wrong version");
    }
    ++publishes_;
    response->set_version(version_);
    return grpc::Status::OK;
  }

  std::vector<v1::TrainStepRequest> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  std::vector<int64_t> versions_before() {
    std::lock_guard<std::mutex> lock(mu_);
    return versions_before_;
  }
  int64_t publishes() {
    std::lock_guard<std::mutex> lock(mu_);
    return publishes_;
  }

 private:
  std::mutex mu_;
  int64_t mismatch_at_step_;
  int64_t step_ = 0, version_ = 0, publishes_ = 0;
  std::vector<v1::TrainStepRequest> batches_;
  std::vector<int64_t> versions_before_;
};

class RlLoopTest : public ::testing::Test {
 protected:
  void Start(int64_t mismatch_at_step = -1) {
    trainer_service_ = std::make_unique<FakeTrainer>(mismatch_at_step);
    for (auto& generator : generator_services_) generator = std::make_unique<FakeGenerator>();
    ASSERT_NO_FATAL_FAILURE(services_.Start(
        trainer_service_.get(), {generator_services_[0].get(), generator_services_[1].get()}));
    scorer_ = std::make_unique<rewards::LocalRewardScorer>(
        *rewards::RewardRegistry::WithBuiltins().Create("math"));
  }
  RlLoopOptions Options(int64_t steps, int64_t staleness) {
    RlLoopOptions options;
    options.steps = steps;
    options.prompts_per_step = 3;
    options.samples_per_prompt = 4;
    options.max_staleness = staleness;
    options.sampling.set_max_tokens(4);
    options.seed = 7;
    return options;
  }
  RlServices Services() {
    return RlServices{services_.trainer(), services_.generators(), scorer_.get(),
                      services_.tokenizer()};
  }

  Dataset dataset_ = AdditionDataset();
  std::unique_ptr<FakeTrainer> trainer_service_;
  std::unique_ptr<FakeGenerator> generator_services_[2];
  std::unique_ptr<rewards::RewardScorer> scorer_;
  LoopTestServices services_;  // after the services: its servers shut down first
};

TEST_F(RlLoopTest, OnPolicyTrainsEveryStepWithFreshSamplesAndGroupAdvantages) {
  Start();
  RlLoop loop(Options(4, 0), Services(), &dataset_, DatasetIterator(&dataset_, 1), 0);
  std::vector<StepRecord> records;
  ASSERT_TRUE(loop.Run([&](const StepRecord& r) { records.push_back(r); }, nullptr, nullptr).ok());
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(trainer_service_->publishes(), 4);
  std::vector<v1::TrainStepRequest> batches = trainer_service_->batches();
  std::vector<int64_t> versions = trainer_service_->versions_before();
  ASSERT_EQ(batches.size(), 4u);
  for (size_t step = 0; step < batches.size(); ++step) {
    ASSERT_EQ(batches[step].rollouts_size(), 12);  // 3 prompts x 4 samples
    for (const v1::Rollout& rollout : batches[step].rollouts()) {
      for (int64_t v : rollout.weight_versions()) EXPECT_EQ(v, versions[step]);
    }
    // Per prompt (4 samples in index order): even samples answer right (reward 1), odd ones
    // wrong (0) unless a+b = 0. Group advantages sum to zero and rank right above wrong.
    for (int g = 0; g < 3; ++g) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += batches[step].rollouts(4 * g + k).advantage();
      EXPECT_NEAR(sum, 0.0, 1e-9);
      const double right = batches[step].rollouts(4 * g).advantage();
      const double wrong = batches[step].rollouts(4 * g + 1).advantage();
      EXPECT_TRUE((right > 0 && wrong < 0) || (right == 0 && wrong == 0)) << right << " " << wrong;
      EXPECT_EQ(batches[step].rollouts(4 * g).group_id(),
                batches[step].rollouts(4 * g + 3).group_id());
    }
    // Idle time is a share of the step's own time.
    for (double fraction :
         {*records[step].idle_fraction_generator, *records[step].idle_fraction_trainer}) {
      EXPECT_GE(fraction, 0.0);
      EXPECT_LE(fraction, 1.0);
    }
    EXPECT_EQ(records[step].step, static_cast<int64_t>(step) + 1);
    EXPECT_EQ(records[step].staleness->counts.size(), 1u);
    EXPECT_EQ(records[step].staleness->counts.at(0), 12);
    EXPECT_EQ(records[step].parity->tokens_compared, [&] {
      int64_t n = 0;
      for (const auto& r : batches[step].rollouts()) n += r.completion_token_ids_size();
      return n;
    }());
  }
  EXPECT_EQ(loop.totals().ages.at(0), 48);
}

TEST_F(RlLoopTest, AsyncSamplesNeverExceedTheStalenessBoundAndReachIt) {
  Start();
  for (int64_t staleness : {1, 2}) {
    RlLoop loop(Options(6, staleness), Services(), &dataset_, DatasetIterator(&dataset_, 1), 0);
    ASSERT_TRUE(loop.Run(nullptr, nullptr, nullptr).ok());
    int64_t max_age = 0;
    for (const auto& [age, count] : loop.totals().ages) {
      EXPECT_LE(age, staleness);
      max_age = std::max(max_age, age);
    }
    EXPECT_EQ(max_age, staleness) << "admission lets generation run ahead by S versions";
  }
}

TEST_F(RlLoopTest, StrictParityStopsWithPositionValuesAndTheCommand) {
  Start(/*mismatch_at_step=*/1);
  RlLoopOptions options = Options(4, 0);
  options.investigate_hint = "lockstep diagnose --model m";
  RlLoop loop(options, Services(), &dataset_, DatasetIterator(&dataset_, 1), 0);
  absl::Status status = loop.Run(nullptr, nullptr, nullptr);
  ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("step 2"), std::string::npos) << status;
  EXPECT_NE(status.message().find("rollout 1"), std::string::npos) << status;
  EXPECT_NE(status.message().find("position 0"), std::string::npos) << status;
  EXPECT_NE(status.message().find("-0.5"), std::string::npos) << status;
  EXPECT_NE(status.message().find("-0.25"), std::string::npos) << status;
  EXPECT_NE(status.message().find("lockstep diagnose --model m"), std::string::npos) << status;
  EXPECT_EQ(trainer_service_->batches().size(), 2u) << "no step after the mismatch";
}

TEST_F(RlLoopTest, ReportParityOnlyRecords) {
  Start(/*mismatch_at_step=*/1);
  RlLoopOptions options = Options(3, 0);
  options.parity = "report";
  RlLoop loop(options, Services(), &dataset_, DatasetIterator(&dataset_, 1), 0);
  ASSERT_TRUE(loop.Run(nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(loop.totals().parity_tokens_mismatched, 1);
}

TEST_F(RlLoopTest, DataCursorResumesThePromptStreamExactly) {
  Start();
  // Straight: 4 steps. Split: 2 steps, cursor, a new loop from the cursor for 2 more.
  RlLoop straight(Options(4, 0), Services(), &dataset_, DatasetIterator(&dataset_, 3), 0);
  ASSERT_TRUE(straight.Run(nullptr, nullptr, nullptr).ok());
  std::vector<v1::TrainStepRequest> expected = trainer_service_->batches();

  RlLoop first(Options(2, 0), Services(), &dataset_, DatasetIterator(&dataset_, 3), 0);
  ASSERT_TRUE(first.Run(nullptr, nullptr, nullptr).ok());
  absl::StatusOr<std::pair<DatasetCursor, int64_t>> cursor =
      RlLoop::ParseDataCursor(first.DataCursor());
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_EQ(cursor->second, 2);
  absl::StatusOr<DatasetIterator> iterator = DatasetIterator::Restore(&dataset_, cursor->first);
  ASSERT_TRUE(iterator.ok());
  RlLoop second(Options(4, 0), Services(), &dataset_, *std::move(iterator), cursor->second);
  ASSERT_TRUE(second.Run(nullptr, nullptr, nullptr).ok());
  std::vector<v1::TrainStepRequest> all = trainer_service_->batches();
  ASSERT_EQ(all.size(), 8u);
  for (int step = 0; step < 4; ++step) {
    const v1::TrainStepRequest& a = expected[step];
    const v1::TrainStepRequest& b = all[4 + step];
    ASSERT_EQ(a.rollouts_size(), b.rollouts_size());
    for (int r = 0; r < a.rollouts_size(); ++r) {
      EXPECT_EQ(a.rollouts(r).prompt_token_ids_size(), b.rollouts(r).prompt_token_ids_size());
      EXPECT_TRUE(std::equal(a.rollouts(r).prompt_token_ids().begin(),
                             a.rollouts(r).prompt_token_ids().end(),
                             b.rollouts(r).prompt_token_ids().begin()))
          << "step " << step << " rollout " << r;
      EXPECT_EQ(a.rollouts(r).group_id(), b.rollouts(r).group_id());
    }
  }
}

// The job driver stops with a clear error, and no run is left half-started, when the lockstep
// binary it starts services from does not exist.
TEST(RunJobTest, MissingServiceBinaryFailsNamingIt) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / absl::StrCat("lockstep_job_test_", getpid());
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      absl::StrCat("[job]\nname = \"x\"\noutput_root = \"", root.string(),
                   "\"\n[model]\npreset = \"tiny\"\n[data]\ntask = \"arithmetic\"\n"),
      "test.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<JobSummary> summary =
      RunJob(*config, {.lockstep_binary = "/nonexistent/lockstep"});
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("/nonexistent/lockstep init-model"), std::string::npos)
      << summary.status();
  EXPECT_FALSE(std::filesystem::exists(root / "x" / "metrics.jsonl"));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace lockstep::orchestrator
