// `lockstep serve reward` and `lockstep serve environment` as real processes: they print the
// serving line, check the token, answer through the clients, and exit 0 on SIGTERM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/environment_client.h"
#include "rewards/episode.h"
#include "rewards/reward_client.h"
#include "tests/rewards/child_process.h"

namespace lockstep::rewards {
namespace {

using std::chrono::milliseconds;
using testing::ChildProcess;
using ::testing::HasSubstr;

class ServeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ =
        (std::filesystem::temp_directory_path() / absl::StrCat("lockstep_serve_token_", getpid()))
            .string();
    std::ofstream(token_file_) << "serve-token\n";
  }
  void TearDown() override { std::filesystem::remove(token_file_); }

  std::string token_file_;
};

TEST_F(ServeCommandTest, ServesTheMathBuiltinWithTokenAndStopsOnSigterm) {
  absl::StatusOr<ChildProcess> server = ChildProcess::Start(
      {LOCKSTEP_BINARY, "serve", "reward", "--builtin", "math", "--options",
       R"({"tolerance": 1e-6})", "--port", "0", "--auth-token-file", token_file_});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> port = server->WaitForServingPort(milliseconds(20000));
  ASSERT_TRUE(port.ok()) << port.status();

  ClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", *port);
  options.auth_token = "serve-token";
  std::unique_ptr<RewardClient> client = *RewardClient::Create(options);
  RewardInput right;
  right.completion = "#### 1,000";
  right.reference = "1000";
  RewardInput wrong = right;
  wrong.completion = "\\boxed{999}";
  const std::vector<ItemOutcome> outcomes = client->Score({right, wrong});
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_EQ(outcomes[0].reward, 1.0);
  ASSERT_TRUE(outcomes[1].ok) << outcomes[1].error;
  EXPECT_EQ(outcomes[1].reward, 0.0);

  options.auth_token = "";
  const std::vector<ItemOutcome> refused = (*RewardClient::Create(options))->Score({right});
  EXPECT_THAT(refused[0].error, HasSubstr("UNAUTHENTICATED"));

  const int status = server->KillAndWait(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(ServeCommandTest, ServesGuessNumberForAnEpisode) {
  absl::StatusOr<ChildProcess> server = ChildProcess::Start(
      {LOCKSTEP_BINARY, "serve", "environment", "--builtin", "guess_number", "--options",
       R"({"max": 10, "max_guesses": 10})", "--port", "0", "--auth-token-file", token_file_});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> port = server->WaitForServingPort(milliseconds(20000));
  ASSERT_TRUE(port.ok()) << port.status();
  EnvironmentClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", *port);
  options.auth_token = "serve-token";
  std::unique_ptr<EnvironmentClient> client = *EnvironmentClient::Create(options);

  // Counts up from 1: solved within 10 guesses, every turn one token.
  int next_guess = 1;
  auto generate = [&](const std::vector<int32_t>&) -> absl::StatusOr<GeneratedTurn> {
    GeneratedTurn turn;
    turn.text = std::to_string(next_guess++);
    turn.tokens = {next_guess};
    turn.logprobs = {-1.0f};
    turn.weight_versions = {0};
    return turn;
  };
  auto encode = [](const Observation& observation) -> absl::StatusOr<std::vector<int32_t>> {
    return std::vector<int32_t>(observation.text.size(), 1000);
  };
  EpisodeStart start;
  start.episode_id = "cli-episode";
  start.reference = "6";
  const EpisodeResult result = RunEpisode(*client, start, {1, 2}, generate, encode);
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_TRUE(result.done);
  EXPECT_EQ(result.num_turns, 6);
  EXPECT_EQ(result.episode_return, 1.0);
  int num_trained = 0;
  for (uint8_t mask : result.loss_mask) num_trained += mask;
  EXPECT_EQ(num_trained, 6);
  EXPECT_EQ(WEXITSTATUS(server->KillAndWait(SIGTERM)), 0);
}

TEST_F(ServeCommandTest, BadOptionsStopTheServerWithAnError) {
  absl::StatusOr<ChildProcess> server =
      ChildProcess::Start({LOCKSTEP_BINARY, "serve", "reward", "--builtin", "math", "--options",
                           R"({"tolerence": 1})", "--port", "0"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE(server->WaitForServingPort(milliseconds(20000)).ok());
  const int status = server->Wait();
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace lockstep::rewards
