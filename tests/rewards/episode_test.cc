// The multi-turn episode driver with the guess_number environment, in-process and over gRPC
// (EnvironmentService + EnvironmentClient on loopback), a fake policy as `generate` and a fake
// tokenizer as `encode`. Model tokens are bytes (< 256) and observation tokens are 1000 + byte, so
// the loss mask can be checked token by token against who wrote each token.
#include "rewards/episode.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/environment_client.h"
#include "rewards/environment_service.h"
#include "rewards/guess_number_env.h"

namespace lockstep::rewards {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kObservationBase = 1000;

// Guesses by binary search over [1, 100], reading "Higher."/"Lower." from the last observation
// the fake tokenizer saw. Records every token it produced and every context it was given.
class BinarySearchPolicy {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(const Observation& observation) {
    last_observation_ = observation.text;
    std::vector<int32_t> tokens;
    for (unsigned char c : observation.text) tokens.push_back(kObservationBase + c);
    return tokens;
  }

  absl::StatusOr<GeneratedTurn> Generate(const std::vector<int32_t>& context) {
    contexts_.push_back(context);
    if (fail_on_turn_ == static_cast<int>(contexts_.size())) {
      return absl::UnavailableError("generator went away");
    }
    if (absl::StartsWith(last_observation_, "Higher")) low_ = guess_ + 1;
    if (absl::StartsWith(last_observation_, "Lower")) high_ = guess_ - 1;
    guess_ = always_guess_ > 0 ? always_guess_ : (low_ + high_) / 2;
    GeneratedTurn turn;
    turn.text = absl::StrCat("My guess: ", guess_);
    for (unsigned char c : turn.text) {
      turn.tokens.push_back(c);
      turn.logprobs.push_back(-0.01f * static_cast<float>(c));
      turn.weight_versions.push_back(7);
    }
    num_model_tokens_ += turn.tokens.size();
    return turn;
  }

  GenerateFn generate() {
    return [this](const std::vector<int32_t>& context) { return Generate(context); };
  }
  EncodeFn encode() {
    return [this](const Observation& observation) { return Encode(observation); };
  }

  int low_ = 1, high_ = 100, guess_ = 0;
  int always_guess_ = 0;  // > 0: always this guess
  int fail_on_turn_ = 0;  // > 0: generate fails on this turn
  size_t num_model_tokens_ = 0;
  std::string last_observation_;
  std::vector<std::vector<int32_t>> contexts_;
};

EpisodeStart Start(const std::string& id, const std::string& secret) {
  EpisodeStart start;
  start.episode_id = id;
  start.prompt = "Let's play.";
  start.reference = secret;
  start.seed = 1;
  return start;
}

// The invariants every trajectory satisfies.
void ExpectWellFormed(const EpisodeResult& result, const BinarySearchPolicy& policy) {
  const size_t n = result.completion_tokens.size();
  ASSERT_EQ(result.logprobs.size(), n);
  ASSERT_EQ(result.weight_versions.size(), n);
  ASSERT_EQ(result.loss_mask.size(), n);
  size_t num_masked_in = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool model_token = result.completion_tokens[i] < kObservationBase;
    EXPECT_EQ(result.loss_mask[i], model_token ? 1 : 0) << "token " << i;
    EXPECT_EQ(std::isnan(result.logprobs[i]), !model_token) << "token " << i;
    EXPECT_EQ(result.weight_versions[i], model_token ? 7 : -1) << "token " << i;
    num_masked_in += result.loss_mask[i];
  }
  EXPECT_EQ(num_masked_in, policy.num_model_tokens_);
  // Each turn saw exactly the prompt and the completion so far.
  for (const std::vector<int32_t>& context : policy.contexts_) {
    ASSERT_LE(context.size(), result.prompt_tokens.size() + n);
    std::vector<int32_t> expected = result.prompt_tokens;
    expected.insert(expected.end(), result.completion_tokens.begin(),
                    result.completion_tokens.begin() +
                        static_cast<std::ptrdiff_t>(context.size() - result.prompt_tokens.size()));
    EXPECT_EQ(context, expected);
  }
}

// guess_number served over gRPC on loopback, reached through EnvironmentClient.
class RemoteEnvironment {
 public:
  explicit RemoteEnvironment(GuessNumberOptions options = {}, std::string token = "env-token") {
    auto environment = std::make_unique<GuessNumberEnvironment>(options);
    environment_ = environment.get();
    service_ = std::make_unique<EnvironmentService>(std::move(environment),
                                                    EnvironmentServiceOptions{token});
    absl::StatusOr<RunningServer> running = StartServer({}, {service_.get()});
    EXPECT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    EnvironmentClientOptions client_options;
    client_options.address = absl::StrCat("127.0.0.1:", running_.port);
    client_options.auth_token = token;
    client_options.initial_backoff = std::chrono::milliseconds(10);
    client_ = *EnvironmentClient::Create(client_options);
  }
  ~RemoteEnvironment() { running_.server->Shutdown(std::chrono::system_clock::now()); }

  EnvironmentClient& client() { return *client_; }
  GuessNumberEnvironment& server_side() { return *environment_; }
  int port() const { return running_.port; }

 private:
  GuessNumberEnvironment* environment_ = nullptr;
  std::unique_ptr<EnvironmentService> service_;
  RunningServer running_;
  std::unique_ptr<EnvironmentClient> client_;
};

TEST(EpisodeTest, RemoteGuessNumberEpisodeMasksExactlyTheModelsTokens) {
  RemoteEnvironment remote;
  BinarySearchPolicy policy;
  const std::vector<int32_t> prompt = {1, 2, 3};
  const EpisodeResult result =
      RunEpisode(remote.client(), Start("ep-1", "37"), prompt, policy.generate(), policy.encode());
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_TRUE(result.done);
  EXPECT_FALSE(result.truncated);
  EXPECT_EQ(result.num_turns, 3);  // 50 (lower), 25 (higher), 37
  EXPECT_EQ(result.step_rewards, (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(result.episode_return, 1.0);
  EXPECT_EQ(result.sub_scores.at("solved"), 1.0);
  EXPECT_EQ(result.sub_scores.at("guesses"), 3.0);
  EXPECT_EQ(result.prompt_tokens, prompt);
  // observation_0, turn, observation, turn, observation, turn: the trajectory ends with the model.
  EXPECT_EQ(result.loss_mask.front(), 0);
  EXPECT_EQ(result.loss_mask.back(), 1);
  ExpectWellFormed(result, policy);
  EXPECT_EQ(remote.server_side().num_open_episodes(), 0);
  EXPECT_GE(remote.client().metrics().rpcs, 4);  // Reset + 3 Steps
}

TEST(EpisodeTest, DriverTurnLimitTruncatesAndClosesTheEpisode) {
  RemoteEnvironment remote;
  BinarySearchPolicy policy;
  policy.always_guess_ = 1;
  EpisodeOptions options;
  options.max_turns = 2;
  const EpisodeResult result = RunEpisode(remote.client(), Start("ep-2", "90"), {5},
                                          policy.generate(), policy.encode(), options);
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_FALSE(result.done);
  EXPECT_TRUE(result.truncated);
  EXPECT_EQ(result.num_turns, 2);
  EXPECT_EQ(result.episode_return, 0.0);
  EXPECT_EQ(result.loss_mask.back(), 1);  // no observation after the last allowed turn
  ExpectWellFormed(result, policy);
  EXPECT_EQ(remote.server_side().num_open_episodes(), 0);  // closed by the driver
}

TEST(EpisodeTest, EnvironmentTurnLimitEndsTheEpisodeUnsolved) {
  GuessNumberEnvironment environment({.min = 1, .max = 100, .max_guesses = 3});
  BinarySearchPolicy policy;
  policy.always_guess_ = 1;
  const EpisodeResult result =
      RunEpisode(environment, Start("ep-3", "50"), {5}, policy.generate(), policy.encode());
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_TRUE(result.done);
  EXPECT_EQ(result.num_turns, 3);
  EXPECT_EQ(result.sub_scores.at("solved"), 0.0);
  ExpectWellFormed(result, policy);
}

TEST(EpisodeTest, TokenBudgetTruncates) {
  GuessNumberEnvironment environment;
  BinarySearchPolicy policy;
  policy.always_guess_ = 1;
  EpisodeOptions options;
  options.max_completion_tokens = 120;
  const EpisodeResult result = RunEpisode(environment, Start("ep-4", "50"), {5}, policy.generate(),
                                          policy.encode(), options);
  EXPECT_TRUE(result.truncated);
  EXPECT_GE(result.completion_tokens.size(), 120u);
  EXPECT_LT(result.num_turns, 7);
  ExpectWellFormed(result, policy);
  EXPECT_EQ(environment.num_open_episodes(), 0);
}

TEST(EpisodeTest, GenerateFailureFailsTheEpisodeAndClosesIt) {
  RemoteEnvironment remote;
  BinarySearchPolicy policy;
  policy.fail_on_turn_ = 2;
  const EpisodeResult result =
      RunEpisode(remote.client(), Start("ep-5", "37"), {5}, policy.generate(), policy.encode());
  EXPECT_TRUE(result.failed);
  EXPECT_THAT(result.error, HasSubstr("generate turn 2"));
  EXPECT_THAT(result.error, HasSubstr("generator went away"));
  EXPECT_EQ(result.num_turns, 1);
  EXPECT_EQ(remote.server_side().num_open_episodes(), 0);
}

TEST(EpisodeTest, UnreachableEnvironmentFailsTheEpisodeAfterRetries) {
  EnvironmentClientOptions options;
  options.address = "127.0.0.1:1";  // nothing listens on port 1
  options.max_attempts = 2;
  options.initial_backoff = std::chrono::milliseconds(5);
  options.deadline = std::chrono::milliseconds(2000);
  std::unique_ptr<EnvironmentClient> client = *EnvironmentClient::Create(options);
  BinarySearchPolicy policy;
  const EpisodeResult result =
      RunEpisode(*client, Start("ep-6", "37"), {5}, policy.generate(), policy.encode());
  EXPECT_TRUE(result.failed);
  EXPECT_THAT(result.error, HasSubstr("reset"));
  EXPECT_THAT(result.error, HasSubstr("UNAVAILABLE"));
  EXPECT_TRUE(result.completion_tokens.empty());
  EXPECT_GE(client->metrics().retries, 1);
}

TEST(EpisodeTest, ObservationTokenIdsAreAppendedWithoutEncoding) {
  // An environment that templates its own observations.
  class TokenEnvironment final : public Environment {
   public:
    std::string name() const override { return "tokens"; }
    absl::StatusOr<ResetResult> Reset(const EpisodeStart&) override {
      ResetResult result;
      result.observation.token_ids = std::vector<int32_t>{1001, 1002};
      return result;
    }
    absl::StatusOr<StepResult> Step(const StepInput& input) override {
      StepResult result;
      result.done = ++steps_ == 2;
      result.reward = 0.5;
      result.observation.token_ids = std::vector<int32_t>{1003};
      return result;
    }
    absl::Status Close(absl::string_view) override { return absl::OkStatus(); }
    int steps_ = 0;
  } environment;
  BinarySearchPolicy policy;
  int num_encodes = 0;
  const EpisodeResult result =
      RunEpisode(environment, Start("ep-7", ""), {5}, policy.generate(), [&](const Observation&) {
        ++num_encodes;
        return absl::StatusOr<std::vector<int32_t>>(std::vector<int32_t>{});
      });
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_EQ(num_encodes, 0);
  EXPECT_EQ(result.episode_return, 1.0);
  EXPECT_EQ(result.completion_tokens[0], 1001);
  EXPECT_EQ(result.completion_tokens[1], 1002);
  ExpectWellFormed(result, policy);
}

TEST(EnvironmentServiceTest, ErrorsKeepTheirCodesOverTheWire) {
  RemoteEnvironment remote;
  EnvironmentClient& client = remote.client();
  ASSERT_TRUE(client.Reset(Start("dup", "5")).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(client.Reset(Start("dup", "5")).status()));
  StepInput step;
  step.episode_id = "nope";
  step.action = "3";
  EXPECT_TRUE(absl::IsNotFound(client.Step(step).status()));
  EXPECT_TRUE(client.Close("dup").ok());
  EXPECT_TRUE(client.Close("dup").ok());  // idempotent
  EXPECT_EQ(remote.server_side().num_open_episodes(), 0);
}

TEST(EnvironmentServiceTest, WrongTokenIsRefused) {
  RemoteEnvironment remote;
  EnvironmentClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", remote.port());
  options.auth_token = "wrong";
  std::unique_ptr<EnvironmentClient> client = *EnvironmentClient::Create(options);
  const absl::Status status = client->Reset(Start("x", "5")).status();
  EXPECT_TRUE(absl::IsUnauthenticated(status)) << status;
  EXPECT_EQ(client->metrics().retries, 0);
}

}  // namespace
}  // namespace lockstep::rewards
