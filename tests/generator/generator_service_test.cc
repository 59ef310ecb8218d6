// GeneratorService served on loopback by a real gRPC server over an EngineLoop (tiny preset,
// 2 layers, batch-invariant mode), called through the generated stub.
#include "generator/generator_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "generator/generator_convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"

namespace lockstep::generator {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBlockSize = 4;
constexpr int64_t kNumBlocks = 256;
constexpr int64_t kMaxSamples = 4;
constexpr uint64_t kModelSeed = 7;

std::shared_ptr<Transformer> MakeModel() {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  ModelOptions options;
  options.numeric_mode = NumericMode::kBatchInvariant;
  return CreateRandomModel(config, kModelSeed, options);
}

std::unique_ptr<Engine> MakeEngine(std::shared_ptr<Transformer> model) {
  EngineOptions options;
  options.block_size = kBlockSize;
  options.kv_cache_bytes = kNumBlocks * BlockManager::BytesPerBlock(model->config(), kBlockSize);
  options.max_samples_per_request = kMaxSamples;
  options.scheduler.max_num_batched_tokens = 64;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(std::move(model), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(*engine);
}

v1::GenerateRequest MakeRequest(int64_t prompt_len, uint64_t seed, int64_t n, int64_t max_tokens) {
  v1::GenerateRequest request;
  for (int64_t i = 0; i < prompt_len; ++i) {
    request.add_prompt_token_ids(static_cast<int64_t>((seed * 131 + i * 17) % 512));
  }
  request.set_n(n);
  request.mutable_sampling()->set_temperature(0.8);
  request.mutable_sampling()->set_top_p(0.95);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  request.mutable_sampling()->set_seed(seed);
  return request;
}

struct StreamResult {
  grpc::Status status;
  std::map<int64_t, v1::GenerateResponse> samples;  // by sample index
  int num_messages = 0;
};

class GeneratorServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    loop_ = std::make_unique<EngineLoop>(MakeEngine(MakeModel()));
    service_ = std::make_unique<GeneratorService>(loop_.get(), GeneratorServiceOptions{});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = v1::Generator::NewStub(channel_);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    loop_.reset();
  }

  StreamResult Generate(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub_->Generate(&context, request);
    StreamResult result;
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      ++result.num_messages;
      result.samples[response.sample_index()] = response;
    }
    result.status = reader->Finish();
    return result;
  }

  v1::GetStatusResponse Status() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetStatusResponse response;
    grpc::Status status = stub_->GetStatus(&context, v1::GetStatusRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // Polls GetStatus until every KV block is free and no request is in flight.
  bool WaitUntilIdle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      v1::GetStatusResponse status = Status();
      if (status.num_kv_blocks_used() == 0 && status.num_requests() == 0 &&
          status.num_running() == 0 && status.num_waiting() == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<GeneratorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generator::Stub> stub_;
};

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(GeneratorServiceTest, StatusOfAnIdleServerShowsAFullPool) {
  v1::GetStatusResponse status = Status();
  EXPECT_EQ(status.weight_version(), 0);
  EXPECT_EQ(status.num_running(), 0);
  EXPECT_EQ(status.num_waiting(), 0);
  EXPECT_EQ(status.num_requests(), 0);
  EXPECT_EQ(status.num_kv_blocks_used(), 0);
  EXPECT_EQ(status.num_kv_blocks_free(), kNumBlocks);
}

TEST_F(GeneratorServiceTest, HealthServiceReportsServing) {
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest, as raw bytes (no health stubs
  // are generated here). The reply HealthCheckResponse{status: SERVING} encodes as 08 01.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::internal::RpcMethod method("/grpc.health.v1.Health/Check",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::Slice empty_request("");  // a null ByteBuffer is not a message; an empty one is
  grpc::ByteBuffer request(&empty_request, 1), response;
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(), method, &context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

TEST_F(GeneratorServiceTest, ConcurrentStreamsMatchAnInProcessEngineRun) {
  constexpr int kNumClients = 4;
  constexpr int64_t kN = 2;
  std::vector<v1::GenerateRequest> requests;
  for (int c = 0; c < kNumClients; ++c) requests.push_back(MakeRequest(5 + 3 * c, 100 + c, kN, 12));

  std::vector<StreamResult> results(kNumClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kNumClients; ++c) {
    clients.emplace_back([&, c] { results[c] = Generate(requests[c]); });
  }
  for (std::thread& client : clients) client.join();

  // The same requests, one after another, through an in-process engine on an identical model.
  std::unique_ptr<Engine> engine = MakeEngine(MakeModel());
  std::map<int64_t, int> client_of_request;
  for (int c = 0; c < kNumClients; ++c) {
    absl::StatusOr<Request> request = FromProto(requests[c], std::nullopt);
    ASSERT_TRUE(request.ok()) << request.status();
    absl::StatusOr<int64_t> id = engine->AddRequest(*request);
    ASSERT_TRUE(id.ok()) << id.status();
    client_of_request[*id] = c;
  }
  std::map<std::pair<int, int64_t>, SampleOutput> expected;
  while (engine->HasUnfinished()) {
    absl::StatusOr<std::vector<SampleOutput>> finished = engine->Step();
    ASSERT_TRUE(finished.ok()) << finished.status();
    for (SampleOutput& out : *finished) {
      expected[{client_of_request[out.request_id], out.sample_index}] = std::move(out);
    }
  }

  for (int c = 0; c < kNumClients; ++c) {
    SCOPED_TRACE(c);
    ASSERT_TRUE(results[c].status.ok()) << results[c].status.error_message();
    EXPECT_EQ(results[c].num_messages, kN);
    ASSERT_EQ(results[c].samples.size(), static_cast<size_t>(kN));
    for (const auto& [index, sample] : results[c].samples) {
      const SampleOutput& want = expected.at({c, index});
      std::vector<int64_t> tokens(sample.token_ids().begin(), sample.token_ids().end());
      std::vector<float> logprobs(sample.logprobs().begin(), sample.logprobs().end());
      std::vector<int64_t> versions(sample.weight_versions().begin(),
                                    sample.weight_versions().end());
      EXPECT_EQ(tokens, want.tokens);
      EXPECT_TRUE(BitEqual(logprobs, want.logprobs));
      EXPECT_EQ(versions, want.weight_versions);
      EXPECT_EQ(sample.finish_reason(), v1::FINISH_REASON_MAX_TOKENS);
      EXPECT_EQ(sample.token_ids_size(), 12);
    }
  }
  EXPECT_TRUE(WaitUntilIdle());
  EXPECT_EQ(Status().num_kv_blocks_free(), kNumBlocks);
}

TEST_F(GeneratorServiceTest, BadRequestsAreInvalidArgumentNamingTheField) {
  struct Case {
    std::string name;
    v1::GenerateRequest request;
    std::string field;
  };
  std::vector<Case> cases;
  {
    v1::GenerateRequest r = MakeRequest(4, 1, 1, 4);
    r.clear_prompt_token_ids();
    cases.push_back({"empty prompt", r, "prompt"});
  }
  {
    v1::GenerateRequest r = MakeRequest(4, 1, 1, 4);
    r.set_prompt_token_ids(2, 512);
    cases.push_back({"token id >= vocab", r, "token id 512"});
  }
  {
    v1::GenerateRequest r = MakeRequest(4, 1, 1, 4);
    r.mutable_sampling()->set_max_tokens(0);
    cases.push_back({"max_tokens 0", r, "max_tokens"});
  }
  {
    v1::GenerateRequest r = MakeRequest(2049, 1, 1, 4);
    cases.push_back({"prompt longer than the context", r, "context"});
  }
  {
    v1::GenerateRequest r = MakeRequest(4, 1, kMaxSamples + 1, 4);
    cases.push_back({"n above the limit", r, "n must be"});
  }
  {
    v1::GenerateRequest r = MakeRequest(4, 1, 1, 4);
    v1::SamplingParams* sampling = r.mutable_sampling();
    sampling->GetReflection()->MutableUnknownFields(sampling)->AddVarint(99, 1);
    cases.push_back({"unknown sampling field", r, "sampling"});
  }
  {
    v1::GenerateRequest r = MakeRequest(4, 1, 1, 4);
    r.mutable_sampling()->set_top_p(0.0);
    cases.push_back({"top_p 0", r, "top_p"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    StreamResult result = Generate(c.request);
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(result.status.error_message(), HasSubstr(c.field));
    EXPECT_EQ(result.num_messages, 0);
    // The server keeps serving.
    StreamResult good = Generate(MakeRequest(4, 2, 2, 3));
    ASSERT_TRUE(good.status.ok()) << good.status.error_message();
    EXPECT_EQ(good.num_messages, 2);
  }
  EXPECT_TRUE(WaitUntilIdle());
}

TEST_F(GeneratorServiceTest, CancelledStreamReturnsItsBlocksToThePool) {
  grpc::ClientContext context;
  // Long enough that it cannot finish before the cancel: ~2 x 102 blocks of the 256.
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, MakeRequest(8, 3, 2, 400));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Status().num_kv_blocks_used() == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "request never started";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  context.TryCancel();
  v1::GenerateResponse response;
  int num_messages = 0;
  while (reader->Read(&response)) ++num_messages;
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(num_messages, 2);

  EXPECT_TRUE(WaitUntilIdle());
  EXPECT_EQ(Status().num_kv_blocks_free(), kNumBlocks);
  // The server keeps serving.
  StreamResult good = Generate(MakeRequest(4, 4, 2, 3));
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.num_messages, 2);
}

TEST_F(GeneratorServiceTest, ShutdownWithAStreamInFlightFinishesIt) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, MakeRequest(8, 5, 2, 400));
  while (Status().num_kv_blocks_used() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A deadline of now cancels the call at once: the 400 tokens still to come take far longer
  // than this thread needs to get here, however fast the machine (a 100 ms grace let a fast
  // machine finish the whole request first).
  server_->Shutdown(std::chrono::system_clock::now());
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  EXPECT_FALSE(reader->Finish().ok());
  server_.reset();
  loop_.reset();  // joins the loop thread; must not hang
}

}  // namespace
}  // namespace lockstep::generator
