// The whole weight-sync path across real processes (label weight_sync): `lockstep serve trainer`
// and two `lockstep serve generator` processes on loopback (tiny preset, batch-invariant mode),
// driven over gRPC as the orchestrator drives them:
//   JoinWeightSync on all three → rollouts from both generators → Trainer.TrainStep (version 1)
//   → long Generate streams started → PublishWeights(1) ∥ ReceiveWeights(1) on both generators.
// Then every generator's weights are bit-identical to the trainer's (GetStatus weights_sha256 of
// all three processes agree, and differ from before the step), and the streams that were in flight
// during the sync completed with tokens of version 0 followed by tokens of version 1.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/generator.grpc.pb.h"
#include "proto/trainer.grpc.pb.h"
#include "tests/weight_sync/child_process.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using ::lockstep::testing::ChildProcess;
using ::lockstep::testing::FreeLoopbackPort;
using std::chrono::milliseconds;

constexpr char kBinary[] = LOCKSTEP_BINARY;
constexpr int kNumGenerators = 2;

// Waits for "lockstep <what> serving on HOST:PORT" and returns "127.0.0.1:PORT".
std::optional<std::string> WaitUntilServing(ChildProcess& process) {
  while (std::optional<std::string> line = process.ReadLine(milliseconds(60000))) {
    const size_t at = line->find(" serving on ");
    if (at == std::string::npos) continue;
    const size_t colon = line->rfind(':');
    return absl::StrCat("127.0.0.1:", line->substr(colon + 1));
  }
  return std::nullopt;
}

template <typename Context>
void WithDeadline(Context* context, int seconds = 60) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

// The join of a group {trainer 0, generators 1..kNumGenerators} named `name`, its store on a
// free loopback port (rank and transport left to the caller).
v1::JoinWeightSyncRequest GroupJoin(const std::string& name) {
  v1::JoinWeightSyncRequest join;
  join.set_store_host("127.0.0.1");
  join.set_store_port(FreeLoopbackPort());
  join.set_world_size(1 + kNumGenerators);
  join.set_group_name(name);
  join.set_timeout_ms(30000);
  return join;
}

class TrainerGeneratorsSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / absl::StrCat("lockstep_ws_processes_", getpid());
    fs::create_directories(root_);
    const std::string model = (root_ / "model").string();
    ChildProcess init({kBinary, "init-model", "--preset", "tiny", "--seed", "5", "--out", model});
    ASSERT_EQ(init.Wait(milliseconds(60000)), 0) << init.output();

    trainer_process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kBinary, "serve", "trainer", "--model", model, "--mode",
                                 "batch_invariant", "--threads", "1", "--port", "0"});
    for (int g = 0; g < kNumGenerators; ++g) {
      generator_processes_.push_back(std::make_unique<ChildProcess>(
          std::vector<std::string>{kBinary, "serve", "generator", "--model", model, "--mode",
                                   "batch_invariant", "--threads", "1", "--port", "0"}));
    }
    std::optional<std::string> trainer_address = WaitUntilServing(*trainer_process_);
    ASSERT_TRUE(trainer_address.has_value()) << trainer_process_->output();
    // --threads reaches the service (its start-up line says how many it computes on).
    EXPECT_NE(trainer_process_->output().find(", 1 threads,"), std::string::npos)
        << trainer_process_->output();
    trainer_ = v1::Trainer::NewStub(
        grpc::CreateChannel(*trainer_address, grpc::InsecureChannelCredentials()));
    for (auto& process : generator_processes_) {
      std::optional<std::string> address = WaitUntilServing(*process);
      ASSERT_TRUE(address.has_value()) << process->output();
      EXPECT_NE(process->output().find(", 1 threads"), std::string::npos) << process->output();
      generators_.push_back(v1::Generator::NewStub(
          grpc::CreateChannel(*address, grpc::InsecureChannelCredentials())));
    }
  }

  void TearDown() override {
    for (auto& process : generator_processes_) kill(process->pid(), SIGTERM);
    if (trainer_process_) kill(trainer_process_->pid(), SIGTERM);
    for (auto& process : generator_processes_) process->Wait(milliseconds(10000));
    if (trainer_process_) trainer_process_->Wait(milliseconds(10000));
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  std::string TrainerDigest() {
    grpc::ClientContext context;
    WithDeadline(&context);
    v1::TrainerStatusRequest request;
    request.set_with_weights_sha256(true);
    v1::TrainerStatusResponse response;
    const grpc::Status status = trainer_->GetStatus(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.weights_sha256().size(), 64u);
    return response.weights_sha256();
  }

  v1::GetStatusResponse GeneratorStatus(int g, bool with_digest) {
    grpc::ClientContext context;
    WithDeadline(&context);
    v1::GetStatusRequest request;
    request.set_with_weights_sha256(with_digest);
    v1::GetStatusResponse response;
    const grpc::Status status = generators_[g]->GetStatus(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // All samples of one Generate call.
  std::vector<v1::GenerateResponse> Generate(int g, const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    WithDeadline(&context, 120);
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        generators_[g]->Generate(&context, request);
    std::vector<v1::GenerateResponse> samples;
    v1::GenerateResponse sample;
    while (reader->Read(&sample)) samples.push_back(sample);
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << "generator " << g << ": " << status.error_message();
    return samples;
  }

  fs::path root_;
  std::unique_ptr<ChildProcess> trainer_process_;
  std::vector<std::unique_ptr<ChildProcess>> generator_processes_;
  std::unique_ptr<v1::Trainer::Stub> trainer_;
  std::vector<std::unique_ptr<v1::Generator::Stub>> generators_;
};

TEST_F(TrainerGeneratorsSyncTest, AfterTrainStepAndSyncEveryGeneratorIsBitIdenticalToTrainer) {
  // Same checkpoint everywhere: the three digests agree before anything happens.
  const std::string initial = TrainerDigest();
  for (int g = 0; g < kNumGenerators; ++g) {
    const v1::GetStatusResponse status = GeneratorStatus(g, /*with_digest=*/true);
    EXPECT_EQ(status.weights_sha256(), initial) << "generator " << g;
    EXPECT_EQ(status.weights_sha256_version(), 0);
  }

  // 1. Form the group {trainer 0, generators 1..2}, all three joins concurrently.
  v1::JoinWeightSyncRequest join = GroupJoin("processes-1");
  join.set_bucket_bytes(int64_t{1} << 20);  // several buckets for the ~4 MB tiny model
  join.set_verify(true);
  std::vector<std::future<grpc::Status>> joins;
  for (int rank = 0; rank <= kNumGenerators; ++rank) {
    joins.push_back(std::async(std::launch::async, [this, join, rank]() mutable {
      join.set_rank(rank);
      grpc::ClientContext context;
      WithDeadline(&context);
      v1::JoinWeightSyncResponse response;
      return rank == 0 ? trainer_->JoinWeightSync(&context, join, &response)
                       : generators_[rank - 1]->JoinWeightSync(&context, join, &response);
    }));
  }
  for (int rank = 0; rank <= kNumGenerators; ++rank) {
    const grpc::Status status = joins[rank].get();
    ASSERT_TRUE(status.ok()) << "rank " << rank << ": " << status.error_message();
  }

  // 2. Rollouts under version 0 from both generators, scored (reward: share of even token ids),
  // with group-relative advantages.
  v1::TrainStepRequest step;
  for (int g = 0; g < kNumGenerators; ++g) {
    v1::GenerateRequest request;
    for (int64_t token : {10 + g, 20, 30, 40}) request.add_prompt_token_ids(token);
    request.set_n(4);
    request.mutable_sampling()->set_max_tokens(8);
    request.mutable_sampling()->set_seed(100 + g);
    request.mutable_sampling()->set_ignore_eos(true);
    std::vector<v1::GenerateResponse> samples = Generate(g, request);
    ASSERT_EQ(samples.size(), 4u);
    std::vector<double> rewards;
    for (const v1::GenerateResponse& sample : samples) {
      const double even = std::count_if(sample.token_ids().begin(), sample.token_ids().end(),
                                        [](int64_t token) { return token % 2 == 0; });
      rewards.push_back(even / sample.token_ids_size());
    }
    double mean = 0;
    for (double reward : rewards) mean += reward / rewards.size();
    for (size_t i = 0; i < samples.size(); ++i) {
      for (int64_t version : samples[i].weight_versions()) ASSERT_EQ(version, 0);
      v1::Rollout* rollout = step.add_rollouts();
      *rollout->mutable_prompt_token_ids() = request.prompt_token_ids();
      *rollout->mutable_completion_token_ids() = samples[i].token_ids();
      *rollout->mutable_behaviour_logprobs() = samples[i].logprobs();
      *rollout->mutable_weight_versions() = samples[i].weight_versions();
      rollout->set_advantage(rewards[i] - mean);
      rollout->set_group_id(g);
    }
  }

  // 3. One optimizer step: version 1, and the trainer saw the generators' log-probs bit for bit.
  {
    grpc::ClientContext context;
    WithDeadline(&context, 120);
    v1::TrainStepResponse response;
    const grpc::Status status = trainer_->TrainStep(&context, step, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.metrics().weight_version(), 1);
    EXPECT_GT(response.metrics().parity().tokens_compared(), 0);
    EXPECT_EQ(response.metrics().parity().tokens_mismatched(), 0);
  }
  const std::string trained = TrainerDigest();
  ASSERT_NE(trained, initial) << "the train step left the weights unchanged";

  // 4. Long streams on both generators, running before the sync starts.
  std::vector<std::future<std::vector<v1::GenerateResponse>>> streams;
  for (int g = 0; g < kNumGenerators; ++g) {
    v1::GenerateRequest request;
    for (int64_t token : {7, 8, 9}) request.add_prompt_token_ids(token);
    request.set_n(2);
    request.mutable_sampling()->set_max_tokens(2000);
    request.mutable_sampling()->set_seed(7 + g);
    request.mutable_sampling()->set_ignore_eos(true);
    streams.push_back(
        std::async(std::launch::async, [this, g, request] { return Generate(g, request); }));
  }
  for (int g = 0; g < kNumGenerators; ++g) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (GeneratorStatus(g, false).num_running() == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "generator " << g << " idle";
      std::this_thread::sleep_for(milliseconds(2));
    }
  }

  // 5. PublishWeights(1) ∥ ReceiveWeights(1) on both generators.
  std::vector<std::future<std::pair<grpc::Status, v1::WeightSyncResponse>>> syncs;
  for (int rank = 0; rank <= kNumGenerators; ++rank) {
    syncs.push_back(std::async(std::launch::async, [this, rank] {
      grpc::ClientContext context;
      WithDeadline(&context);
      v1::WeightSyncResponse response;
      grpc::Status status;
      if (rank == 0) {
        v1::PublishWeightsRequest request;
        request.set_version(1);
        status = trainer_->PublishWeights(&context, request, &response);
      } else {
        v1::ReceiveWeightsRequest request;
        request.set_version(1);
        status = generators_[rank - 1]->ReceiveWeights(&context, request, &response);
      }
      return std::make_pair(status, response);
    }));
  }
  for (int rank = 0; rank <= kNumGenerators; ++rank) {
    auto [status, response] = syncs[rank].get();
    ASSERT_TRUE(status.ok()) << "rank " << rank << ": " << status.error_message();
    EXPECT_EQ(response.version(), 1);
    EXPECT_GT(response.bytes(), 0);
  }

  // 6. Every generator now runs exactly the trainer's weights.
  EXPECT_EQ(TrainerDigest(), trained);
  for (int g = 0; g < kNumGenerators; ++g) {
    const v1::GetStatusResponse status = GeneratorStatus(g, /*with_digest=*/true);
    EXPECT_EQ(status.weight_version(), 1);
    EXPECT_EQ(status.weights_sha256_version(), 1);
    EXPECT_EQ(status.weights_sha256(), trained) << "generator " << g;
  }

  // 7. The streams in flight during the sync completed: version 0 tokens, then version 1 tokens.
  for (int g = 0; g < kNumGenerators; ++g) {
    std::vector<v1::GenerateResponse> samples = streams[g].get();
    ASSERT_EQ(samples.size(), 2u) << "generator " << g;
    for (const v1::GenerateResponse& sample : samples) {
      ASSERT_EQ(sample.token_ids_size(), 2000);
      ASSERT_EQ(sample.weight_versions_size(), 2000);
      const auto& versions = sample.weight_versions();
      const auto first_new = std::find(versions.begin(), versions.end(), 1);
      EXPECT_EQ(versions[0], 0) << "generator " << g << ": the stream started before the sync";
      EXPECT_NE(first_new, versions.end()) << "generator " << g << ": no token after the swap";
      EXPECT_TRUE(std::all_of(versions.begin(), first_new, [](int64_t v) { return v == 0; }));
      EXPECT_TRUE(std::all_of(first_new, versions.end(), [](int64_t v) { return v == 1; }))
          << "generator " << g << ": versions must switch once, from 0 to 1";
    }
  }
}

// The services derive their group's cuda_device from where their model's weights live (the
// CPU, in every service today), so asking for a GPU transport fails at once, on every rank,
// naming the transport and why; nothing waits for a peer.
TEST_F(TrainerGeneratorsSyncTest, GpuTransportsAreRefusedForWeightsOnTheCpu) {
  for (const v1::WeightSyncTransport transport :
       {v1::WEIGHT_SYNC_TRANSPORT_NCCL, v1::WEIGHT_SYNC_TRANSPORT_CUDA_IPC}) {
    const std::string name =
        transport == v1::WEIGHT_SYNC_TRANSPORT_NCCL ? "transport=nccl" : "transport=cuda_ipc";
    v1::JoinWeightSyncRequest join = GroupJoin("gpu-refused");
    join.set_transport(transport);
    for (int rank = 0; rank <= kNumGenerators; ++rank) {
      join.set_rank(rank);
      grpc::ClientContext context;
      WithDeadline(&context);
      v1::JoinWeightSyncResponse response;
      const grpc::Status status =
          rank == 0 ? trainer_->JoinWeightSync(&context, join, &response)
                    : generators_[rank - 1]->JoinWeightSync(&context, join, &response);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name << " rank " << rank;
      EXPECT_NE(status.error_message().find(name), std::string::npos) << status.error_message();
      EXPECT_NE(status.error_message().find("weights on the CPU"), std::string::npos)
          << status.error_message();
    }
  }
}

}  // namespace
}  // namespace lockstep
