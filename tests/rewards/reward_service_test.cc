// RewardService served on loopback by a real gRPC server, called through the generated stub.
#include "rewards/reward_service.h"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/reward_registry.h"

namespace lockstep::rewards {
namespace {

using ::testing::HasSubstr;

// Returns the completion parsed as a number (so tests can ask for NaN), or an error for "fail".
class EchoReward final : public Reward {
 public:
  absl::string_view name() const override { return "echo"; }
  absl::StatusOr<RewardResult> Score(const RewardInput& input) const override {
    if (input.completion == "fail") return absl::InternalError("verifier crashed");
    RewardResult result;
    result.reward = std::strtod(input.completion.c_str(), nullptr);
    result.sub_scores["tokens"] = static_cast<double>(input.completion_token_ids.size());
    return result;
  }
};

class RewardServiceTest : public testing::Test {
 protected:
  void Start(std::unique_ptr<Reward> reward, RewardServiceOptions options = {}) {
    service_ = std::make_unique<RewardService>(std::move(reward), options);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::Reward::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  grpc::Status Call(const v1::ScoreRequest& request, v1::ScoreResponse* response,
                    const std::string& token = "") {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub_->Score(&context, request, response);
  }

  static v1::RewardItem* AddItem(v1::ScoreRequest* request, const std::string& id,
                                 const std::string& completion, const std::string& reference = "") {
    v1::RewardItem* item = request->add_items();
    item->set_id(id);
    item->set_completion(completion);
    item->set_reference_answer(reference);
    return item;
  }

  std::unique_ptr<RewardService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Reward::Stub> stub_;
};

TEST_F(RewardServiceTest, ScoresABatchWithTheMathBuiltin) {
  auto math = CreateBuiltinReward("math");
  ASSERT_TRUE(math.ok());
  Start(std::move(*math));
  v1::ScoreRequest request;
  AddItem(&request, "right", "so \\boxed{\\frac{1}{2}}", "0.5");
  AddItem(&request, "wrong", "#### 7", "8");
  AddItem(&request, "no-answer", "I give up", "8");
  AddItem(&request, "no-reference", "\\boxed{1}", "");
  v1::ScoreResponse response;
  grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.scores_size(), 4);
  EXPECT_EQ(response.scores(0).id(), "right");
  EXPECT_EQ(response.scores(0).reward(), 1.0);
  EXPECT_EQ(response.scores(0).sub_scores().at("format"), 1.0);
  EXPECT_FALSE(response.scores(0).has_error());
  EXPECT_EQ(response.scores(1).reward(), 0.0);
  EXPECT_EQ(response.scores(2).sub_scores().at("format"), 0.0);
  EXPECT_FALSE(response.scores(2).has_error());
  EXPECT_TRUE(response.scores(3).has_error());
  EXPECT_THAT(response.scores(3).error(), HasSubstr("no reference answer"));
}

TEST_F(RewardServiceTest, FailedAndNonFiniteItemsAreErrorsNotZeros) {
  Start(std::make_unique<EchoReward>());
  v1::ScoreRequest request;
  AddItem(&request, "a", "0.25")->add_completion_token_ids(5);
  AddItem(&request, "b", "fail");
  AddItem(&request, "c", "nan");
  AddItem(&request, "d", "inf");
  v1::ScoreResponse response;
  ASSERT_TRUE(Call(request, &response).ok());
  ASSERT_EQ(response.scores_size(), 4);
  EXPECT_EQ(response.scores(0).reward(), 0.25);
  EXPECT_EQ(response.scores(0).sub_scores().at("tokens"), 1.0);
  EXPECT_THAT(response.scores(1).error(), HasSubstr("verifier crashed"));
  EXPECT_THAT(response.scores(2).error(), HasSubstr("non-finite"));
  EXPECT_THAT(response.scores(3).error(), HasSubstr("non-finite"));
}

TEST_F(RewardServiceTest, EmptyBatchIsFine) {
  Start(std::make_unique<EchoReward>());
  v1::ScoreResponse response;
  ASSERT_TRUE(Call(v1::ScoreRequest(), &response).ok());
  EXPECT_EQ(response.scores_size(), 0);
}

TEST_F(RewardServiceTest, TokenIsRequiredWhenConfigured) {
  RewardServiceOptions options;
  options.token = "s3cret";
  Start(std::make_unique<EchoReward>(), options);
  v1::ScoreRequest request;
  AddItem(&request, "a", "1");
  v1::ScoreResponse response;
  EXPECT_EQ(Call(request, &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(request, &response, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(Call(request, &response, "s3cret").ok());
  EXPECT_EQ(response.scores(0).reward(), 1.0);
}

TEST_F(RewardServiceTest, OversizedBatchIsRejected) {
  RewardServiceOptions options;
  options.max_batch_size = 2;
  Start(std::make_unique<EchoReward>(), options);
  v1::ScoreRequest request;
  for (int i = 0; i < 3; ++i) AddItem(&request, std::to_string(i), "1");
  v1::ScoreResponse response;
  EXPECT_EQ(Call(request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace lockstep::rewards
