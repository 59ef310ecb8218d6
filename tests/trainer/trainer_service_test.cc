// TrainerService served on loopback by a real gRPC server (common/server.h) over a Trainer on the
// tiny preset (2 layers), called through the generated stub with the job's auth token. The last
// test starts the real `lockstep serve trainer --resume …` process.
#include "trainer/trainer_service.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/free_port.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "proto/trainer.grpc.pb.h"
#include "weight_sync/sync_group.h"

extern char** environ;

namespace lockstep::trainer {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "service-test-token";
constexpr uint64_t kModelSeed = 5;
constexpr int64_t kMaxSequenceLength = 48;

ModelConfig TinyConfig() {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  return config;
}

TrainerOptions MakeOptions(const std::filesystem::path& checkpoint_dir) {
  TrainerOptions options;
  options.lr = 1e-3;
  options.max_sequence_length = kMaxSequenceLength;
  options.micro_batch_tokens = 64;
  options.checkpoint_dir = checkpoint_dir.string();
  options.keep_last = 2;
  return options;
}

v1::Rollout MakeRollout(int index, int64_t version) {
  v1::Rollout rollout;
  for (int j = 0; j < 4 + index % 3; ++j) rollout.add_prompt_token_ids((index * 37 + j * 11) % 512);
  for (int j = 0; j < 5 + index % 2; ++j) {
    rollout.add_completion_token_ids((index * 19 + j * 23 + 1) % 512);
    rollout.add_behaviour_logprobs(-5.0f - 0.1f * j);
    rollout.add_weight_versions(version);
  }
  rollout.set_advantage(index % 2 == 0 ? 1.0 : -0.5);
  rollout.set_group_id(index / 2);
  return rollout;
}

v1::TrainStepRequest MakeBatch(int64_t version, int num_rollouts = 4) {
  v1::TrainStepRequest request;
  for (int i = 0; i < num_rollouts; ++i) *request.add_rollouts() = MakeRollout(i, version);
  return request;
}

// A port that was free a moment ago, outside the ephemeral range (common/free_port.h).
int FreePort() { return PickFreePort().value(); }

class TrainerServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("trainer_service_test_", getpid(), "_",
                        testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    StartService(MakeTrainer());
  }

  void TearDown() override {
    StopService();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Trainer> MakeTrainer() {
    std::shared_ptr<Transformer> model = CreateRandomModel(TinyConfig(), kModelSeed);
    absl::StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(model, MakeOptions(dir_ / "checkpoints"));
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    return std::move(*trainer);
  }

  void StartService(std::unique_ptr<Trainer> trainer) {
    trainer_ = std::move(trainer);
    TrainerServiceOptions options;
    options.auth_token = kToken;
    service_ = std::make_unique<TrainerService>(trainer_.get(), options);
    absl::StatusOr<RunningServer> running = StartServer({}, {service_.get()});
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(running->server);
    stub_ = v1::Trainer::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", running->port)));
  }

  void StopService() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
    service_.reset();
    trainer_.reset();
  }

  // A client context with the token (or `token` when given) and a deadline.
  std::unique_ptr<grpc::ClientContext> Context(const std::string& token = kToken) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    AttachAuthToken(context.get(), token);
    return context;
  }

  v1::TrainerStatusResponse Status() {
    v1::TrainerStatusResponse response;
    grpc::Status status = stub_->GetStatus(Context().get(), {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // The trainer's log-probs of a fixed probe sequence: changes iff the weights change.
  std::vector<float> ProbeLogprobs() {
    v1::ComputeLogprobsRequest request;
    v1::LogprobSequence* sequence = request.add_sequences();
    for (int j = 0; j < 6; ++j) sequence->add_prompt_token_ids(j * 41 % 512);
    for (int j = 0; j < 6; ++j) sequence->add_completion_token_ids(j * 29 % 512 + 3);
    v1::ComputeLogprobsResponse response;
    grpc::Status status = stub_->ComputeLogprobs(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (response.sequences_size() != 1) return {};
    return {response.sequences(0).logprobs().begin(), response.sequences(0).logprobs().end()};
  }

  std::filesystem::path dir_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<TrainerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Trainer::Stub> stub_;
};

TEST_F(TrainerServiceTest, TrainStepReturnsMetricsAndBumpsVersion) {
  const v1::TrainerStatusResponse before = Status();
  EXPECT_EQ(before.step(), 0);
  EXPECT_EQ(before.weight_version(), 0);
  EXPECT_EQ(before.num_parameters(), TinyConfig().NumParameters());
  const std::vector<float> probe_before = ProbeLogprobs();
  ASSERT_EQ(probe_before.size(), 6u);

  const v1::TrainStepRequest batch = MakeBatch(/*version=*/0);
  int64_t completion_tokens = 0;
  for (const v1::Rollout& rollout : batch.rollouts()) {
    completion_tokens += rollout.completion_token_ids_size();
  }
  v1::TrainStepResponse response;
  grpc::Status status = stub_->TrainStep(Context().get(), batch, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const v1::StepMetrics& metrics = response.metrics();
  EXPECT_EQ(metrics.step(), 1);
  EXPECT_EQ(metrics.weight_version(), 1);
  EXPECT_EQ(metrics.sequences(), batch.rollouts_size());
  EXPECT_EQ(metrics.tokens(), completion_tokens);
  EXPECT_TRUE(std::isfinite(metrics.loss()));
  EXPECT_GT(metrics.grad_norm(), 0);
  EXPECT_GE(metrics.micro_batches(), 1);
  EXPECT_DOUBLE_EQ(metrics.lr(), 1e-3);
  // Every token was sampled at the trainer's version: all compared; the made-up behaviour
  // log-probs are not the model's, so they mismatch.
  EXPECT_EQ(metrics.parity().tokens_compared(), completion_tokens);
  EXPECT_EQ(metrics.parity().tokens_mismatched(), completion_tokens);
  EXPECT_TRUE(metrics.parity().has_mismatch());

  const v1::TrainerStatusResponse after = Status();
  EXPECT_EQ(after.step(), 1);
  EXPECT_EQ(after.weight_version(), 1);
  EXPECT_NE(ProbeLogprobs(), probe_before);

  // The next step may use rollouts of version 0 (stale by one) or 1.
  v1::TrainStepRequest second = MakeBatch(/*version=*/1);
  *second.add_rollouts() = MakeRollout(7, /*version=*/0);
  status = stub_->TrainStep(Context().get(), second, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.metrics().weight_version(), 2);
}

TEST_F(TrainerServiceTest, BadInputIsInvalidArgumentAndLeavesTheTrainerUnchanged) {
  struct Case {
    std::string name;
    std::function<void(v1::TrainStepRequest&)> spoil;
    std::string expected_words;  // the message names the problem
  };
  const std::vector<Case> cases = {
      {"length mismatch",
       [](v1::TrainStepRequest& r) {
         r.mutable_rollouts(1)->mutable_behaviour_logprobs()->RemoveLast();
       },
       "rollout 1"},
      {"NaN advantage",
       [](v1::TrainStepRequest& r) {
         r.mutable_rollouts(2)->set_advantage(std::numeric_limits<double>::quiet_NaN());
       },
       "advantage"},
      {"infinite advantage",
       [](v1::TrainStepRequest& r) {
         r.mutable_rollouts(0)->set_advantage(std::numeric_limits<double>::infinity());
       },
       "advantage"},
      {"empty batch", [](v1::TrainStepRequest& r) { r.clear_rollouts(); }, "empty"},
      {"unknown version",
       [](v1::TrainStepRequest& r) { r.mutable_rollouts(3)->set_weight_versions(0, 5); },
       "version"},
      {"over-long sequence",
       [](v1::TrainStepRequest& r) {
         v1::Rollout* rollout = r.mutable_rollouts(1);
         for (int64_t j = 0; j < kMaxSequenceLength; ++j) rollout->add_prompt_token_ids(1);
       },
       "rollout 1"},
  };
  const std::vector<float> probe_before = ProbeLogprobs();
  for (const Case& test_case : cases) {
    v1::TrainStepRequest request = MakeBatch(/*version=*/0);
    test_case.spoil(request);
    v1::TrainStepResponse response;
    grpc::Status status = stub_->TrainStep(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << test_case.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(test_case.expected_words)) << test_case.name;
    const v1::TrainerStatusResponse after = Status();
    EXPECT_EQ(after.step(), 0) << test_case.name;
    EXPECT_EQ(after.weight_version(), 0) << test_case.name;
  }
  EXPECT_EQ(ProbeLogprobs(), probe_before);  // the weights are untouched too

  v1::ComputeLogprobsRequest bad_temperature;
  bad_temperature.set_temperature(-1);
  bad_temperature.add_sequences()->add_completion_token_ids(1);
  v1::ComputeLogprobsResponse logprobs;
  grpc::Status status = stub_->ComputeLogprobs(Context().get(), bad_temperature, &logprobs);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("temperature"));
}

TEST_F(TrainerServiceTest, CallsWithoutTheTokenAreUnauthenticated) {
  for (const std::string& token : {std::string(), std::string("wrong-token")}) {
    v1::TrainStepResponse train;
    EXPECT_EQ(stub_->TrainStep(Context(token).get(), MakeBatch(0), &train).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::SftStepRequest sft_request;
    EXPECT_EQ(stub_->SftStep(Context(token).get(), sft_request, &train).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::ComputeLogprobsResponse logprobs;
    EXPECT_EQ(stub_->ComputeLogprobs(Context(token).get(), {}, &logprobs).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::SaveCheckpointResponse saved;
    EXPECT_EQ(stub_->SaveCheckpoint(Context(token).get(), {}, &saved).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::TrainerStatusResponse status;
    EXPECT_EQ(stub_->GetStatus(Context(token).get(), {}, &status).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::JoinWeightSyncResponse joined;
    EXPECT_EQ(stub_->JoinWeightSync(Context(token).get(), {}, &joined).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::WeightSyncResponse published;
    EXPECT_EQ(stub_->PublishWeights(Context(token).get(), {}, &published).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(Status().step(), 0);
}

TEST_F(TrainerServiceTest, SftStepTrains) {
  v1::SftStepRequest request;
  for (int i = 0; i < 3; ++i) {
    v1::SftExample* example = request.add_examples();
    for (int j = 0; j < 4; ++j) example->add_prompt_token_ids((i * 7 + j) % 512);
    for (int j = 0; j < 3; ++j) example->add_completion_token_ids((i * 5 + j + 2) % 512);
  }
  v1::TrainStepResponse response;
  grpc::Status status = stub_->SftStep(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.metrics().step(), 1);
  EXPECT_EQ(response.metrics().tokens(), 9);
  EXPECT_TRUE(std::isfinite(response.metrics().loss()));
}

TEST_F(TrainerServiceTest, SaveCheckpointWritesALoadableDirectoryAndResumeReportsTheCursor) {
  v1::TrainStepResponse train;
  ASSERT_TRUE(stub_->TrainStep(Context().get(), MakeBatch(0), &train).ok());
  v1::SaveCheckpointRequest request;
  request.set_data_cursor("epoch=1;offset=42");
  v1::SaveCheckpointResponse saved;
  grpc::Status status = stub_->SaveCheckpoint(Context().get(), request, &saved);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(saved.step(), 1);
  ASSERT_TRUE(std::filesystem::is_directory(saved.path())) << saved.path();

  // Hugging Face layout: the weights load as a model and equal the trainer's.
  absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(saved.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const TensorMap saved_weights = StateDict(**loaded);
  for (const auto& [name, tensor] : trainer_->Parameters()) {
    ASSERT_TRUE(saved_weights.count(name)) << name;
    EXPECT_TRUE(torch::equal(saved_weights.at(name), tensor)) << name;
  }
  const std::vector<float> probe = ProbeLogprobs();

  // A fresh trainer resumed from it reports step, version and cursor through the service.
  StopService();
  std::unique_ptr<Trainer> resumed = MakeTrainer();
  absl::Status load = resumed->LoadCheckpoint(saved.path());
  ASSERT_TRUE(load.ok()) << load;
  StartService(std::move(resumed));
  const v1::TrainerStatusResponse after = Status();
  EXPECT_EQ(after.step(), 1);
  EXPECT_EQ(after.weight_version(), 1);
  EXPECT_EQ(after.data_cursor(), "epoch=1;offset=42");
  EXPECT_FALSE(after.resumed_from().empty());
  EXPECT_EQ(ProbeLogprobs(), probe);
}

TEST_F(TrainerServiceTest, PublishWeightsBroadcastsTheCurrentVersionOnly) {
  v1::WeightSyncResponse published;
  v1::PublishWeightsRequest publish;
  publish.set_version(0);
  grpc::Status status = stub_->PublishWeights(Context().get(), publish, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("JoinWeightSync"));

  v1::JoinWeightSyncRequest join;
  join.set_store_host("127.0.0.1");
  join.set_rank(1);
  join.set_world_size(2);
  v1::JoinWeightSyncResponse joined;
  status = stub_->JoinWeightSync(Context().get(), join, &joined);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("rank"));

  v1::TrainStepResponse train;
  ASSERT_TRUE(stub_->TrainStep(Context().get(), MakeBatch(0), &train).ok());

  // A receiver (rank 1) joins from a thread of this process, as a generator would.
  const int port = FreePort();
  join.set_rank(0);
  join.set_store_port(port);
  join.set_group_name("service-test");
  join.set_timeout_ms(20000);
  join.set_verify(true);
  weight_sync::Manifest manifest = weight_sync::ManifestOf(trainer_->Parameters());
  absl::StatusOr<TensorMap> received;
  std::thread receiver([&] {
    weight_sync::GroupOptions options;
    options.store_port = port;
    options.rank = 1;
    options.world_size = 2;
    options.group_name = "service-test";
    options.timeout = std::chrono::milliseconds(20000);
    options.verify = true;
    absl::StatusOr<std::unique_ptr<weight_sync::WeightSyncGroup>> group =
        weight_sync::WeightSyncGroup::Join(options, manifest);
    if (!group.ok()) {
      received = group.status();
      return;
    }
    received = (*group)->Receive(/*expected_version=*/1, torch::kFloat32);
  });
  status = stub_->JoinWeightSync(Context().get(), join, &joined);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(joined.num_parameters(), static_cast<int64_t>(manifest.entries.size()));
  EXPECT_EQ(joined.total_bytes(), manifest.num_elements() * 4);

  publish.set_version(0);  // stale: the trainer holds version 1
  status = stub_->PublishWeights(Context().get(), publish, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("version"));

  publish.set_version(1);
  status = stub_->PublishWeights(Context().get(), publish, &published);
  receiver.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(published.version(), 1);
  EXPECT_EQ(published.bytes(), manifest.num_elements() * 4);
  ASSERT_TRUE(received.ok()) << received.status();
  for (const auto& [name, tensor] : trainer_->Parameters()) {
    ASSERT_TRUE(received->count(name)) << name;
    EXPECT_TRUE(torch::equal(received->at(name), tensor)) << name;
  }
}

// `lockstep serve trainer --resume DIR` prints its address, then reports the checkpoint's data
// cursor; SIGTERM stops it cleanly.
TEST_F(TrainerServiceTest, ServeCommandResumesAndReportsTheDataCursor) {
  v1::TrainStepResponse train;
  ASSERT_TRUE(stub_->TrainStep(Context().get(), MakeBatch(0), &train).ok());
  v1::SaveCheckpointRequest request;
  request.set_data_cursor("prompt-offset=96");
  v1::SaveCheckpointResponse saved;
  ASSERT_TRUE(stub_->SaveCheckpoint(Context().get(), request, &saved).ok());

  const std::filesystem::path model_dir = dir_ / "model";
  ASSERT_TRUE(SaveModel(*CreateRandomModel(TinyConfig(), kModelSeed), model_dir).ok());
  const std::filesystem::path token_file = dir_ / "token";
  ASSERT_TRUE(WriteAuthTokenFile(token_file.string(), kToken).ok());

  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  // Under timeout(1), so that a server that never starts cannot hang the test.
  const std::vector<std::string> args = {"/usr/bin/timeout",
                                         "120",
                                         LOCKSTEP_BINARY,
                                         "serve",
                                         "trainer",
                                         "--model",
                                         model_dir.string(),
                                         "--resume",
                                         (dir_ / "checkpoints").string(),
                                         "--checkpoint-dir",
                                         (dir_ / "checkpoints").string(),
                                         "--auth-token-file",
                                         token_file.string(),
                                         "--port",
                                         "0"};
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);

  // Read stdout until "serving on 127.0.0.1:PORT" (the process is killed if it never comes).
  FILE* output = fdopen(out[0], "r");
  int port = 0;
  char line[1024];
  while (port == 0 && std::fgets(line, sizeof(line), output) != nullptr) {
    const char* at = std::strstr(line, "serving on 127.0.0.1:");
    if (at != nullptr) port = std::atoi(at + std::strlen("serving on 127.0.0.1:"));
  }
  ASSERT_GT(port, 0) << "lockstep serve trainer did not start";
  auto stub = v1::Trainer::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", port)));
  v1::TrainerStatusResponse status;
  grpc::Status rpc = stub->GetStatus(Context().get(), {}, &status);
  EXPECT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(status.step(), 1);
  EXPECT_EQ(status.data_cursor(), "prompt-offset=96");
  EXPECT_THAT(status.resumed_from(), HasSubstr("checkpoints"));

  kill(pid, SIGTERM);
  int exit_status = 0;
  waitpid(pid, &exit_status, 0);
  std::fclose(output);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0);
}

}  // namespace
}  // namespace lockstep::trainer
