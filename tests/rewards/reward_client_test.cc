// RewardClient against real loopback servers: the math built-in served by RewardService, the
// fault-injecting server (in-process, and as a process killed with -9 mid-run) and the Python
// example server started as a process. Every test checks the accounting invariant
// items_sent == items_scored + items_failed once the client is idle.
#include "rewards/reward_client.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/reward_registry.h"
#include "rewards/reward_service.h"
#include "tests/rewards/child_process.h"
#include "tests/rewards/fault_reward_service.h"

namespace lockstep::rewards {
namespace {

using ::testing::AllOf;
using testing::ChildProcess;
using testing::FaultOptions;
using testing::FaultRewardService;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

RewardInput Item(const std::string& completion, const std::string& reference = "") {
  RewardInput input;
  input.prompt = "What is the answer?";
  input.completion = completion;
  input.reference = reference;
  return input;
}

std::vector<RewardInput> Items(int count, const std::string& completion) {
  return std::vector<RewardInput>(static_cast<size_t>(count), Item(completion));
}

// Collects the outcomes of many ScoreAsync calls and waits for all of them.
class OutcomeSink {
 public:
  ScoreDoneCallback Callback() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++num_expected_;
    }
    return [this](std::vector<ItemOutcome> outcomes) {
      std::lock_guard<std::mutex> lock(mu_);
      for (ItemOutcome& outcome : outcomes) outcomes_.push_back(std::move(outcome));
      ++num_done_;
      changed_.notify_all();
    };
  }

  // Waits until `count` callbacks have run (all of them when count < 0).
  bool WaitForCallbacks(int count = -1, milliseconds timeout = milliseconds(30000)) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout,
                             [&] { return num_done_ >= (count < 0 ? num_expected_ : count); });
  }

  std::vector<ItemOutcome> outcomes() {
    std::lock_guard<std::mutex> lock(mu_);
    return outcomes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int num_expected_ = 0;
  int num_done_ = 0;
  std::vector<ItemOutcome> outcomes_;
};

void ExpectBalanced(const ClientMetrics& metrics) {
  EXPECT_EQ(metrics.items_in_flight, 0);
  EXPECT_EQ(metrics.items_sent, metrics.items_scored + metrics.items_failed);
}

ClientOptions FastOptions(int port) {
  ClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  options.deadline = milliseconds(5000);
  options.initial_backoff = milliseconds(10);
  return options;
}

std::unique_ptr<RewardClient> MakeClient(const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<RewardClient>> client = RewardClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// A FaultRewardService on an in-process loopback server.
class FaultServer {
 public:
  explicit FaultServer(FaultOptions options) : service_(std::move(options)) {
    absl::StatusOr<RunningServer> running = StartServer({}, {&service_});
    EXPECT_TRUE(running.ok()) << running.status();
    if (running.ok()) running_ = *std::move(running);
  }
  ~FaultServer() {
    if (running_.server) running_.server->Shutdown(std::chrono::system_clock::now());
  }
  int port() const { return running_.port; }
  FaultRewardService& service() { return service_; }

 private:
  FaultRewardService service_;
  RunningServer running_;
};

TEST(RewardClientTest, RejectsBadOptionsNamingTheField) {
  ClientOptions options;
  EXPECT_THAT(RewardClient::Create(options).status().message(), HasSubstr("address"));
  options.address = "127.0.0.1:1";
  options.max_concurrency = 0;
  EXPECT_THAT(RewardClient::Create(options).status().message(), HasSubstr("max_concurrency"));
  options.max_concurrency = 1;
  options.max_batch_items = 0;
  EXPECT_THAT(RewardClient::Create(options).status().message(), HasSubstr("max_batch_items"));
  options.max_batch_items = 1;
  options.backoff_multiplier = 0.5;
  EXPECT_THAT(RewardClient::Create(options).status().message(), HasSubstr("backoff_multiplier"));
}

TEST(RewardClientTest, ScoresWithTheMathBuiltinOverGrpcInBatches) {
  RewardService service(*CreateBuiltinReward("math"), {.token = "s3cret"});
  absl::StatusOr<RunningServer> running = StartServer({}, {&service});
  ASSERT_TRUE(running.ok()) << running.status();
  ClientOptions options = FastOptions(running->port);
  options.auth_token = "s3cret";
  options.max_batch_items = 3;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  ASSERT_NE(client, nullptr);

  std::vector<RewardInput> items;
  for (int i = 0; i < 7; ++i) items.push_back(Item(absl::StrCat("so \\boxed{", i, "}"), "3"));
  items.push_back(Item("\\boxed{1}", ""));  // no reference: the built-in fails this item
  const std::vector<ItemOutcome> outcomes = client->Score(items);
  ASSERT_EQ(outcomes.size(), 8u);
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(outcomes[i].ok) << outcomes[i].error;
    EXPECT_EQ(outcomes[i].reward, i == 3 ? 1.0 : 0.0) << i;
    EXPECT_EQ(outcomes[i].sub_scores.at("format"), 1.0);
  }
  EXPECT_FALSE(outcomes[7].ok);
  EXPECT_THAT(outcomes[7].error, HasSubstr("no reference answer"));
  const ClientMetrics metrics = client->metrics();
  EXPECT_EQ(metrics.rpcs, 3);  // 8 items in batches of at most 3
  EXPECT_EQ(metrics.items_scored, 7);
  EXPECT_EQ(metrics.items_failed, 1);
  ExpectBalanced(metrics);
  EXPECT_TRUE(client->Score({}).empty());
  running->server->Shutdown();
}

TEST(RewardClientTest, RetriesUnavailableThenScoresEachItemOnce) {
  FaultServer server({.fail_first_calls = 2});
  ClientOptions options = FastOptions(server.port());
  options.max_attempts = 3;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  const std::vector<ItemOutcome> outcomes = client->Score(Items(5, "0.5"));
  ASSERT_EQ(outcomes.size(), 5u);
  for (const ItemOutcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.ok) << outcome.error;
    EXPECT_EQ(outcome.reward, 0.5);
  }
  const ClientMetrics metrics = client->metrics();
  EXPECT_EQ(metrics.rpcs, 3);
  EXPECT_EQ(metrics.retries, 2);
  EXPECT_EQ(metrics.rpcs_failed, 2);
  EXPECT_EQ(metrics.items_sent, 5);
  EXPECT_EQ(metrics.items_scored, 5);
  ExpectBalanced(metrics);
  EXPECT_EQ(server.service().num_calls(), 3);
}

TEST(RewardClientTest, GivesUpAfterMaxAttemptsAndFailsEveryItemWithTheReason) {
  FaultServer server({.fail_first_calls = 100});
  ClientOptions options = FastOptions(server.port());
  options.max_attempts = 3;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  const std::vector<ItemOutcome> outcomes = client->Score(Items(4, "1"));
  for (const ItemOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.ok);
    EXPECT_EQ(outcome.reward, 0.0);
    EXPECT_THAT(outcome.error, AllOf(HasSubstr("UNAVAILABLE"), HasSubstr("after 3 attempts")));
  }
  EXPECT_EQ(server.service().num_calls(), 3);
  EXPECT_EQ(client->metrics().items_failed, 4);
  ExpectBalanced(client->metrics());
}

TEST(RewardClientTest, ServerSlowerThanTheDeadlineFailsAfterRetries) {
  FaultServer server({.delay = milliseconds(1000)});
  ClientOptions options = FastOptions(server.port());
  options.deadline = milliseconds(250);
  options.max_attempts = 2;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  const Clock::time_point start = Clock::now();
  const std::vector<ItemOutcome> outcomes = client->Score(Items(3, "1"));
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  for (const ItemOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.ok);
    EXPECT_THAT(outcome.error, HasSubstr("DEADLINE_EXCEEDED"));
  }
  const ClientMetrics metrics = client->metrics();
  EXPECT_EQ(metrics.rpcs, 2);
  EXPECT_EQ(metrics.deadline_exceeded, 2);
  EXPECT_EQ(metrics.items_failed, 3);
  ExpectBalanced(metrics);
}

TEST(RewardClientTest, NonFiniteRewardsAndItemErrorsFailOnlyTheirItems) {
  FaultServer server({});
  std::unique_ptr<RewardClient> client = MakeClient(FastOptions(server.port()));
  const std::vector<ItemOutcome> outcomes = client->Score(
      {Item("0.25"), Item("nan"), Item("inf"), Item("-inf"), Item("fail"), Item("-2")});
  ASSERT_EQ(outcomes.size(), 6u);
  EXPECT_TRUE(outcomes[0].ok);
  EXPECT_EQ(outcomes[0].reward, 0.25);
  EXPECT_EQ(outcomes[0].sub_scores.at("length"), 4.0);
  for (int i : {1, 2, 3}) {
    EXPECT_FALSE(outcomes[i].ok) << i;
    EXPECT_THAT(outcomes[i].error, HasSubstr("non-finite reward")) << i;
  }
  EXPECT_FALSE(outcomes[4].ok);
  EXPECT_THAT(outcomes[4].error, HasSubstr("injected item error"));
  EXPECT_TRUE(outcomes[5].ok);
  EXPECT_EQ(outcomes[5].reward, -2.0);
  const ClientMetrics metrics = client->metrics();
  EXPECT_EQ(metrics.items_scored, 2);
  EXPECT_EQ(metrics.items_failed, 4);
  EXPECT_EQ(server.service().num_calls(), 1);  // bad items are not a reason to call again
  ExpectBalanced(metrics);
}

TEST(RewardClientTest, WrongNumberOfScoresFailsTheWholeBatchWithoutRetry) {
  FaultServer server({.drop_last_score = true});
  std::unique_ptr<RewardClient> client = MakeClient(FastOptions(server.port()));
  const std::vector<ItemOutcome> outcomes = client->Score(Items(4, "1"));
  for (const ItemOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.ok);
    EXPECT_THAT(outcome.error, HasSubstr("returned 3 scores for 4 items"));
  }
  EXPECT_EQ(server.service().num_calls(), 1);
  EXPECT_EQ(client->metrics().items_failed, 4);
  ExpectBalanced(client->metrics());
}

TEST(RewardClientTest, WrongTokenIsRefusedWithoutRetry) {
  FaultServer server({.token = "right"});
  ClientOptions options = FastOptions(server.port());
  options.auth_token = "wrong";
  std::unique_ptr<RewardClient> client = MakeClient(options);
  const std::vector<ItemOutcome> outcomes = client->Score(Items(2, "1"));
  for (const ItemOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.ok);
    EXPECT_THAT(outcome.error, AllOf(HasSubstr("UNAUTHENTICATED"), HasSubstr("after 1 attempt")));
  }
  EXPECT_EQ(client->metrics().rpcs, 1);
  EXPECT_EQ(client->metrics().retries, 0);
  ExpectBalanced(client->metrics());
}

TEST(RewardClientTest, ConcurrencyLimitIsRespectedAndScoreAsyncNeverBlocks) {
  FaultServer server({.delay = milliseconds(100)});
  ClientOptions options = FastOptions(server.port());
  options.max_concurrency = 3;
  options.max_batch_items = 2;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  OutcomeSink sink;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < 8; ++i) client->ScoreAsync(Items(3, "1"), sink.Callback());  // 16 calls
  // Waiting for the calls would take >= 16 / 3 x 100 ms; queueing them takes microseconds.
  EXPECT_LT(Clock::now() - start, milliseconds(250));
  ASSERT_TRUE(sink.WaitForCallbacks());
  EXPECT_EQ(sink.outcomes().size(), 24u);
  for (const ItemOutcome& outcome : sink.outcomes()) EXPECT_TRUE(outcome.ok) << outcome.error;
  EXPECT_EQ(server.service().num_calls(), 16);
  EXPECT_EQ(server.service().max_concurrent_calls(), 3);
  EXPECT_LE(client->metrics().max_concurrent_rpcs, 3);
  ExpectBalanced(client->metrics());
}

TEST(RewardClientTest, DestroyingTheClientFailsWhatIsPendingAndRunsEveryCallback) {
  FaultServer server({.delay = milliseconds(1500)});
  ClientOptions options = FastOptions(server.port());
  options.max_concurrency = 1;
  options.max_batch_items = 1;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  OutcomeSink sink;
  client->ScoreAsync(Items(3, "1"), sink.Callback());
  std::this_thread::sleep_for(milliseconds(100));  // the first call is in flight
  const Clock::time_point start = Clock::now();
  client.reset();
  EXPECT_LT(Clock::now() - start, milliseconds(1000));  // cancelled, not waited for
  ASSERT_TRUE(sink.WaitForCallbacks(-1, milliseconds(0)));
  ASSERT_EQ(sink.outcomes().size(), 3u);
  for (const ItemOutcome& outcome : sink.outcomes()) EXPECT_FALSE(outcome.ok);
  EXPECT_THAT(sink.outcomes()[2].error, HasSubstr("shut down"));
}

// The fault server as a real process, killed with SIGKILL while calls are in flight: batches
// caught by the kill are retried, then failed; the ones scored before stay scored; nothing is
// counted twice. A new server on the same port is then used again (the run continues).
TEST(RewardClientTest, ServerKilledMidRunFailsOnlyWhatItCouldNotScore) {
  absl::StatusOr<ChildProcess> server =
      ChildProcess::Start({LOCKSTEP_FAULT_REWARD_SERVER, "--delay-ms", "20"});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> port = server->WaitForServingPort(milliseconds(10000));
  ASSERT_TRUE(port.ok()) << port.status();

  ClientOptions options = FastOptions(*port);
  options.max_concurrency = 4;
  options.max_batch_items = 2;
  options.max_attempts = 3;
  options.initial_backoff = milliseconds(20);
  std::unique_ptr<RewardClient> client = MakeClient(options);
  OutcomeSink sink;
  constexpr int kNumCalls = 60;
  for (int i = 0; i < kNumCalls; ++i) client->ScoreAsync(Items(2, "1"), sink.Callback());
  ASSERT_TRUE(sink.WaitForCallbacks(8));
  server->KillAndWait(SIGKILL);
  ASSERT_TRUE(sink.WaitForCallbacks());

  const std::vector<ItemOutcome> outcomes = sink.outcomes();
  ASSERT_EQ(outcomes.size(), 2u * kNumCalls);
  int num_scored = 0;
  for (const ItemOutcome& outcome : outcomes) {
    if (outcome.ok) {
      ++num_scored;
      EXPECT_EQ(outcome.reward, 1.0);
    } else {
      EXPECT_THAT(outcome.error, HasSubstr("UNAVAILABLE"));
      EXPECT_THAT(outcome.error, HasSubstr("after 3 attempts"));
    }
  }
  const ClientMetrics metrics = client->metrics();
  EXPECT_GE(num_scored, 16);
  EXPECT_LT(num_scored, 2 * kNumCalls);
  EXPECT_EQ(metrics.items_sent, 2 * kNumCalls);
  EXPECT_EQ(metrics.items_scored, num_scored);
  EXPECT_EQ(metrics.items_failed, 2 * kNumCalls - num_scored);
  EXPECT_GT(metrics.retries, 0);
  ExpectBalanced(metrics);

  // The run continues: a server restarted on the same port scores new items.
  absl::StatusOr<ChildProcess> restarted = ChildProcess::Start(
      {LOCKSTEP_FAULT_REWARD_SERVER, "--port", std::to_string(*port), "--delay-ms", "0"});
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  ASSERT_TRUE(restarted->WaitForServingPort(milliseconds(10000)).ok());
  std::vector<ItemOutcome> after;
  for (int attempt = 0; attempt < 20; ++attempt) {  // the channel reconnects within ~1 s
    after = client->Score(Items(2, "0.5"));
    if (after[0].ok) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(after[0].ok) << after[0].error;
  EXPECT_EQ(after[1].reward, 0.5);
  ExpectBalanced(client->metrics());
}

// The Python example server (rewards/examples/python) as a real process on Debian's grpcio.
TEST(RewardClientTest, PythonExampleServerScoresThroughTheClient) {
  const std::string token_file =
      (std::filesystem::temp_directory_path() / absl::StrCat("lockstep_py_token_", getpid()))
          .string();
  std::ofstream(token_file) << "py-token\n";
  absl::StatusOr<ChildProcess> server = ChildProcess::Start(
      {"/usr/bin/python3", LOCKSTEP_SOURCE_DIR "/rewards/examples/python/reward_server.py",
       "--port", "0", "--auth-token-file", token_file});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> port = server->WaitForServingPort(milliseconds(20000));
  std::filesystem::remove(token_file);
  ASSERT_TRUE(port.ok()) << port.status();

  ClientOptions options = FastOptions(*port);
  options.auth_token = "py-token";
  options.max_batch_items = 2;
  std::unique_ptr<RewardClient> client = MakeClient(options);
  const std::vector<ItemOutcome> outcomes =
      client->Score({Item("The answer is 1,234.", "1234"), Item("I think 7", "#### 8"),
                     Item("no idea", "3"), Item("42", "")});
  ASSERT_EQ(outcomes.size(), 4u);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_EQ(outcomes[0].reward, 1.0);
  EXPECT_EQ(outcomes[0].sub_scores.at("correct"), 1.0);
  ASSERT_TRUE(outcomes[1].ok) << outcomes[1].error;
  EXPECT_EQ(outcomes[1].reward, 0.0);
  ASSERT_TRUE(outcomes[2].ok) << outcomes[2].error;
  EXPECT_EQ(outcomes[2].sub_scores.at("format"), 0.0);
  EXPECT_FALSE(outcomes[3].ok);
  EXPECT_THAT(outcomes[3].error, HasSubstr("no reference answer"));
  EXPECT_EQ(client->metrics().rpcs, 2);
  ExpectBalanced(client->metrics());

  options.auth_token = "wrong";
  std::unique_ptr<RewardClient> refused = MakeClient(options);
  const std::vector<ItemOutcome> refused_outcomes = refused->Score({Item("1", "1")});
  EXPECT_FALSE(refused_outcomes[0].ok);
  EXPECT_THAT(refused_outcomes[0].error, HasSubstr("UNAUTHENTICATED"));
}

// The C++ example server (rewards/examples/cpp) as a real process.
TEST(RewardClientTest, CppExampleServerScoresThroughTheClient) {
  absl::StatusOr<ChildProcess> server =
      ChildProcess::Start({LOCKSTEP_KEYWORD_REWARD_SERVER, "--port", "0"});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> port = server->WaitForServingPort(milliseconds(10000));
  ASSERT_TRUE(port.ok()) << port.status();
  std::unique_ptr<RewardClient> client = MakeClient(FastOptions(*port));
  RewardInput item = Item("red and blue");
  item.metadata["keywords"] = "red,green,blue,black";
  const std::vector<ItemOutcome> outcomes = client->Score({item, Item("no keywords")});
  ASSERT_EQ(outcomes.size(), 2u);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_EQ(outcomes[0].reward, 0.5);
  EXPECT_EQ(outcomes[0].sub_scores.at("green"), 0.0);
  EXPECT_EQ(outcomes[0].sub_scores.at("blue"), 1.0);
  EXPECT_FALSE(outcomes[1].ok);
  EXPECT_THAT(outcomes[1].error, HasSubstr("no metadata"));
  ExpectBalanced(client->metrics());
}

}  // namespace
}  // namespace lockstep::rewards
