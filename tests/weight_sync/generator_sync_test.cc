// GeneratorService weight sync on loopback (label weight_sync): a real gRPC server over an
// EngineLoop (tiny preset, 2 layers) is rank 1; this test is rank 0 (the trainer's side). While
// Generate streams are in flight, ReceiveWeights(1) receives new weights and swaps them between
// engine steps: the streams complete, each sample's tokens carry version 0 then version 1, and
// the engine's parameters end up bit-identical to what rank 0 sent.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "generator/generator_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "tests/weight_sync/child_process.h"
#include "tests/weight_sync/synthetic_params.h"
#include "weight_sync/sync_group.h"

namespace lockstep::generator {
namespace {

using ::lockstep::testing::FreeLoopbackPort;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

ModelConfig TinyConfig() {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  return config;
}

class GeneratorSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = CreateRandomModel(TinyConfig(), /*seed=*/7);
    EngineOptions engine_options;
    engine_options.block_size = 4;
    engine_options.kv_cache_bytes = 512 * BlockManager::BytesPerBlock(model_->config(), 4);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(model_, engine_options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    loop_ = std::make_unique<EngineLoop>(*std::move(engine));
    GeneratorServiceOptions options;
    options.auth_token = "sync-token";
    options.weight_manifest = weight_sync::ManifestOf(StateDict(*model_));
    options.weight_dtype = torch::kFloat32;
    service_ = std::make_unique<GeneratorService>(loop_.get(), options);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Generator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    service_.reset();
    loop_.reset();
  }

  void Authorize(grpc::ClientContext* context, int seconds = 30) {
    context->AddMetadata("authorization", "Bearer sync-token");
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  v1::JoinWeightSyncRequest JoinRequest(int store_port, const std::string& group) {
    v1::JoinWeightSyncRequest request;
    request.set_store_host("127.0.0.1");
    request.set_store_port(store_port);
    request.set_rank(1);
    request.set_world_size(2);
    request.set_group_name(group);
    request.set_timeout_ms(5000);
    request.set_bucket_bytes(int64_t{1} << 20);
    request.set_verify(true);
    return request;
  }

  weight_sync::GroupOptions TrainerOptions(int store_port, const std::string& group) {
    weight_sync::GroupOptions options;
    options.store_port = store_port;
    options.rank = 0;
    options.world_size = 2;
    options.group_name = group;
    options.timeout = milliseconds(5000);
    options.bucket_bytes = int64_t{1} << 20;
    options.verify = true;
    return options;
  }

  std::shared_ptr<Transformer> model_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<GeneratorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Generator::Stub> stub_;
};

TEST_F(GeneratorSyncTest, InFlightRequestsSwitchVersionBetweenStepsAndWeightsAreBitIdentical) {
  const int store_port = FreeLoopbackPort();
  // Join: the RPC (rank 1) and rank 0 here, concurrently.
  auto join = std::async(std::launch::async, [&] {
    grpc::ClientContext context;
    Authorize(&context);
    v1::JoinWeightSyncResponse response;
    grpc::Status status = stub_->JoinWeightSync(&context, JoinRequest(store_port, "g1"), &response);
    return std::make_pair(status, response);
  });
  const TensorMap new_weights = StateDict(*CreateRandomModel(TinyConfig(), /*seed=*/99));
  absl::StatusOr<std::unique_ptr<weight_sync::WeightSyncGroup>> trainer =
      weight_sync::WeightSyncGroup::Join(TrainerOptions(store_port, "g1"),
                                         weight_sync::ManifestOf(new_weights));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto [join_status, join_response] = join.get();
  ASSERT_TRUE(join_status.ok()) << join_status.error_message();
  EXPECT_EQ(join_response.num_parameters(), static_cast<int64_t>(new_weights.size()));
  EXPECT_EQ(join_response.total_bytes(), (*trainer)->total_bytes());

  // Long requests, so that they are still running when the swap happens.
  constexpr int kNumStreams = 3;
  std::vector<std::future<std::pair<grpc::Status, std::vector<v1::GenerateResponse>>>> streams;
  for (int i = 0; i < kNumStreams; ++i) {
    streams.push_back(std::async(std::launch::async, [&, i] {
      v1::GenerateRequest request;
      for (int t = 0; t < 8; ++t) request.add_prompt_token_ids(1 + (i * 37 + t * 11) % 400);
      request.set_n(2);
      request.mutable_sampling()->set_max_tokens(400);
      request.mutable_sampling()->set_ignore_eos(true);
      request.mutable_sampling()->set_seed(i);
      grpc::ClientContext context;
      Authorize(&context, 120);
      auto reader = stub_->Generate(&context, request);
      std::vector<v1::GenerateResponse> samples;
      v1::GenerateResponse response;
      while (reader->Read(&response)) samples.push_back(response);
      return std::make_pair(reader->Finish(), samples);
    }));
  }
  // Wait until the engine is generating, then sync version 1.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (loop_->status().num_running < kNumStreams * 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_EQ(loop_->status().num_running, kNumStreams * 2);
  auto receive = std::async(std::launch::async, [&] {
    grpc::ClientContext context;
    Authorize(&context);
    v1::ReceiveWeightsRequest request;
    request.set_version(1);
    v1::WeightSyncResponse response;
    grpc::Status status = stub_->ReceiveWeights(&context, request, &response);
    return std::make_pair(status, response);
  });
  ASSERT_TRUE((*trainer)->Send(new_weights, 1).ok());
  auto [receive_status, receive_response] = receive.get();
  ASSERT_TRUE(receive_status.ok()) << receive_status.error_message();
  EXPECT_EQ(receive_response.version(), 1);
  EXPECT_EQ(receive_response.bytes(), (*trainer)->total_bytes());
  EXPECT_GE(receive_response.swap_pause_ms(), 0.0);
  // Finished after the swap: the engine already reports version 1.
  EXPECT_EQ(loop_->status().weight_version, 1);
  EXPECT_GT(loop_->status().num_running, 0) << "the requests should outlive the swap";

  // Every parameter of the engine's model is now bit-identical to what rank 0 sent.
  EXPECT_EQ(weight_sync::testing::FirstBitDifference(new_weights, StateDict(*model_)), "");

  int num_samples_spanning_the_swap = 0;
  for (auto& stream : streams) {
    auto [status, samples] = stream.get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(samples.size(), 2u);
    for (const v1::GenerateResponse& sample : samples) {
      ASSERT_EQ(sample.weight_versions_size(), 400);
      // Versions never go back, start at 0 and end at 1.
      for (int t = 1; t < sample.weight_versions_size(); ++t) {
        ASSERT_LE(sample.weight_versions(t - 1), sample.weight_versions(t));
      }
      EXPECT_EQ(sample.weight_versions(399), 1);
      if (sample.weight_versions(0) == 0) ++num_samples_spanning_the_swap;
    }
  }
  EXPECT_EQ(num_samples_spanning_the_swap, kNumStreams * 2);
}

TEST_F(GeneratorSyncTest, RefusesWithoutGroupWithoutTokenAndOnManifestMismatch) {
  {
    grpc::ClientContext context;
    Authorize(&context);
    v1::ReceiveWeightsRequest request;
    request.set_version(1);
    v1::WeightSyncResponse response;
    grpc::Status status = stub_->ReceiveWeights(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("JoinWeightSync"));
  }
  {
    grpc::ClientContext context;  // no token
    v1::JoinWeightSyncResponse response;
    grpc::Status status = stub_->JoinWeightSync(&context, JoinRequest(1, "x"), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Authorize(&context);
    v1::JoinWeightSyncRequest request = JoinRequest(1234, "x");
    request.set_rank(0);
    v1::JoinWeightSyncResponse response;
    grpc::Status status = stub_->JoinWeightSync(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("rank"));
  }
  // A trainer with 3 layers against this 2-layer generator: refused naming the first tensor.
  const int store_port = FreeLoopbackPort();
  auto join = std::async(std::launch::async, [&] {
    grpc::ClientContext context;
    Authorize(&context);
    v1::JoinWeightSyncResponse response;
    return stub_->JoinWeightSync(&context, JoinRequest(store_port, "arch"), &response);
  });
  ModelConfig bigger = TinyConfig();
  bigger.num_hidden_layers = 3;
  const absl::Status trainer_status =
      weight_sync::WeightSyncGroup::Join(
          TrainerOptions(store_port, "arch"),
          weight_sync::ManifestOf(StateDict(*CreateRandomModel(bigger, 1))))
          .status();
  const grpc::Status generator_status = join.get();
  EXPECT_EQ(trainer_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(generator_status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(generator_status.error_message(),
              HasSubstr("tensor 'model.layers.2.input_layernorm.weight' exists on rank 0 but not "
                        "on rank 1"));
}

}  // namespace
}  // namespace lockstep::generator
