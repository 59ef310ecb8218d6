// Multi-turn rollouts through the RL loop (fake trainer and generator on loopback, the
// guess_number environment in-process): every trained rollout's loss mask is true exactly on the
// tokens the generator sampled and false on the environment's, environment tokens carry weight
// versions the trainer knows, the staleness check reads only the model's tokens, and an episode
// the environment fails is excluded from the batch and counted (sent == scored + failed).
// Observations are rendered in the job's chat template. Also the sample -> Rollout conversion on
// its own.
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "data/prompt_format.h"
#include "orchestrator/environment_rollouts.h"
#include "orchestrator/rl_loop.h"
#include "orchestrator/train_rollout.h"
#include "orchestrator/valid_utf8.h"
#include "proto/generator.grpc.pb.h"
#include "proto/trainer.grpc.pb.h"
#include "rewards/guess_number_env.h"
#include "tests/orchestrator/loop_test_services.h"

namespace lockstep::orchestrator {
namespace {

constexpr int64_t kEos = kLoopTestEos;

// Answers a context with a guess derived from it ("<len % 19>" then EOS), one token per
// character, stamped with the current version; remembers each turn by its context.
class TurnGenerator final : public v1::Generator::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    std::vector<int64_t> context(request->prompt_token_ids().begin(),
                                 request->prompt_token_ids().end());
    const std::string text = std::to_string(context.size() % 19);
    v1::GenerateResponse response;
    for (char c : text) response.add_token_ids(c);
    response.add_token_ids(kEos);
    for (int t = 0; t < response.token_ids_size(); ++t) {
      response.add_logprobs(-0.5f);
      response.add_weight_versions(version_.load());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      turns_[context] =
          std::vector<int64_t>(response.token_ids().begin(), response.token_ids().end());
    }
    writer->Write(response);
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                         v1::GetStatusResponse* response) override {
    response->set_weight_version(version_.load());
    return grpc::Status::OK;
  }
  grpc::Status ReceiveWeights(grpc::ServerContext*, const v1::ReceiveWeightsRequest* request,
                              v1::WeightSyncResponse* response) override {
    version_.store(request->version());
    response->set_version(request->version());
    return grpc::Status::OK;
  }

  // The tokens generated for exactly this context, or nullptr.
  const std::vector<int64_t>* TurnAfter(const std::vector<int64_t>& context) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = turns_.find(context);
    return it == turns_.end() ? nullptr : &it->second;
  }

 private:
  std::atomic<int64_t> version_{0};
  std::mutex mu_;
  std::map<std::vector<int64_t>, std::vector<int64_t>> turns_;
};

// Records every TrainStep; its version goes up by one per step.
class RecordingTrainer final : public v1::Trainer::Service {
 public:
  grpc::Status TrainStep(grpc::ServerContext*, const v1::TrainStepRequest* request,
                         v1::TrainStepResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    batches_.push_back(*request);
    versions_before_.push_back(version_);
    ++version_;
    response->mutable_metrics()->set_step(version_);
    response->mutable_metrics()->set_weight_version(version_);
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::TrainerStatusRequest*,
                         v1::TrainerStatusResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_weight_version(version_);
    return grpc::Status::OK;
  }
  grpc::Status PublishWeights(grpc::ServerContext*, const v1::PublishWeightsRequest* request,
                              v1::WeightSyncResponse* response) override {
    response->set_version(request->version());
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

 private:
  std::mutex mu_;
  int64_t version_ = 0;
  std::vector<v1::TrainStepRequest> batches_;
  std::vector<int64_t> versions_before_;
};

// guess_number, except that every Step of an episode whose id ends in "-s0" fails.
class FlakyEnvironment final : public rewards::Environment {
 public:
  explicit FlakyEnvironment(rewards::GuessNumberOptions options) : inner_(options) {}
  std::string name() const override { return "flaky_guess_number"; }
  absl::StatusOr<rewards::ResetResult> Reset(const rewards::EpisodeStart& start) override {
    return inner_.Reset(start);
  }
  absl::StatusOr<rewards::StepResult> Step(const rewards::StepInput& input) override {
    if (absl::EndsWith(input.episode_id, "-s0")) return absl::UnavailableError("injected");
    return inner_.Step(input);
  }
  absl::Status Close(absl::string_view episode_id) override { return inner_.Close(episode_id); }

 private:
  rewards::GuessNumberEnvironment inner_;
};

class MultiTurnLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(services_.Start(&trainer_service_, {&generator_service_}));
  }

  // Runs `steps` steps of 2 prompts x 4 episodes (up to 3 turns) against `environment`.
  RlTotals Run(rewards::Environment& environment, int64_t steps, PromptFormat format = {}) {
    RlLoopOptions options;
    options.steps = steps;
    options.prompts_per_step = 2;
    options.samples_per_prompt = 4;
    options.sampling.set_max_tokens(4);
    options.sampling.add_stop_token_ids(kEos);
    options.seed = 5;
    EnvironmentRolloutOptions episode_options;
    episode_options.samples_per_prompt = 4;
    episode_options.max_turns = 3;
    episode_options.sampling = options.sampling;
    episode_options.num_threads = 4;
    episode_options.format = std::move(format);
    EnvironmentRollouts episodes(&environment, services_.tokenizer(), episode_options);
    RlServices services{services_.trainer(), services_.generators(), nullptr, services_.tokenizer(),
                        &episodes};
    RlLoop loop(options, services, &dataset_, DatasetIterator(&dataset_, 3), 0);
    absl::Status status =
        loop.Run([&](const StepRecord& r) { records_.push_back(r); }, nullptr, nullptr);
    EXPECT_TRUE(status.ok()) << status;
    return loop.totals();
  }

  // The loss mask a rollout should have: true on the tokens of every generated turn (found by
  // its context), false elsewhere.
  std::vector<bool> ExpectedMask(const v1::Rollout& rollout) {
    std::vector<int64_t> full(rollout.prompt_token_ids().begin(), rollout.prompt_token_ids().end());
    const std::vector<int64_t> completion(rollout.completion_token_ids().begin(),
                                          rollout.completion_token_ids().end());
    std::vector<bool> mask;
    size_t pos = 0;
    while (pos < completion.size()) {
      const std::vector<int64_t>* turn = generator_service_.TurnAfter(full);
      if (turn != nullptr && pos + turn->size() <= completion.size() &&
          std::equal(turn->begin(), turn->end(), completion.begin() + pos)) {
        mask.insert(mask.end(), turn->size(), true);
        full.insert(full.end(), turn->begin(), turn->end());
        pos += turn->size();
      } else {
        mask.push_back(false);
        full.push_back(completion[pos]);
        ++pos;
      }
    }
    return mask;
  }

  Dataset dataset_ = AdditionDataset();
  RecordingTrainer trainer_service_;
  TurnGenerator generator_service_;
  LoopTestServices services_;  // after the services: its servers shut down first
  std::vector<StepRecord> records_;
};

TEST_F(MultiTurnLoopTest, LossMaskCoversExactlyTheModelsTokens) {
  rewards::GuessNumberEnvironment environment({.min = 0, .max = 18, .max_guesses = 3});
  const RlTotals totals = Run(environment, 3);
  const std::vector<v1::TrainStepRequest> batches = trainer_service_.batches();
  const std::vector<int64_t> versions = trainer_service_.versions_before();
  ASSERT_EQ(batches.size(), 3u);
  int64_t multi_turn = 0, model_tokens = 0, environment_tokens = 0;
  for (size_t step = 0; step < batches.size(); ++step) {
    EXPECT_EQ(batches[step].rollouts_size(), 8);  // 2 prompts x 4 episodes, none failed
    for (const v1::Rollout& rollout : batches[step].rollouts()) {
      ASSERT_EQ(rollout.loss_mask_size(), rollout.completion_token_ids_size());
      const std::vector<bool> expected = ExpectedMask(rollout);
      int turns = 0;
      for (int j = 0; j < rollout.loss_mask_size(); ++j) {
        EXPECT_EQ(rollout.loss_mask(j), expected[j]) << "step " << step << " token " << j;
        // Model tokens keep the generator's log-prob; the environment's are NaN (no loss).
        EXPECT_EQ(std::isnan(rollout.behaviour_logprobs(j)), !rollout.loss_mask(j));
        // Every version is one the trainer knows (on-policy: the version before the step).
        EXPECT_EQ(rollout.weight_versions(j), versions[step]);
        (rollout.loss_mask(j) ? model_tokens : environment_tokens) += 1;
        turns += rollout.loss_mask(j) && (j == 0 || !rollout.loss_mask(j - 1));
      }
      EXPECT_FALSE(rollout.loss_mask(0));  // observation 0 comes first
      multi_turn += turns > 1;
    }
  }
  EXPECT_GT(multi_turn, 0);  // some episodes took more than one guess
  EXPECT_EQ(totals.model_tokens_trained, model_tokens);
  EXPECT_EQ(totals.environment_tokens_trained, environment_tokens);
  EXPECT_EQ(totals.reward_items_sent, 24);
  EXPECT_EQ(totals.reward_items_scored, 24);
  EXPECT_EQ(totals.reward_items_failed, 0);
  // Every episode is counted once, in the record of the step it ended in.
  EXPECT_EQ(totals.episodes.episodes, 24);
  for (const StepRecord& record : records_) {
    ASSERT_TRUE(record.episodes.has_value());
    EXPECT_GT(*record.rollout_environment_tokens, 0);
    EXPECT_EQ(*record.env_tokens, *record.rollout_environment_tokens);
  }
}

// The environment's messages are rendered in the job's chat template (here Llama 3's), not a
// fixed one: every episode's completion opens with the first observation as a Llama 3 user turn
// and the assistant header, and no Qwen3 markup appears anywhere.
TEST_F(MultiTurnLoopTest, ObservationsUseTheJobsChatTemplate) {
  rewards::GuessNumberEnvironment environment({.min = 0, .max = 18, .max_guesses = 3});
  PromptFormat llama3;
  llama3.family = ChatTemplateFamily::kLlama3;
  Run(environment, 1, llama3);
  const std::vector<v1::TrainStepRequest> batches = trainer_service_.batches();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].rollouts_size(), 8);
  int num_followed = 0;
  for (const v1::Rollout& rollout : batches[0].rollouts()) {
    const std::vector<int32_t> ids(rollout.completion_token_ids().begin(),
                                   rollout.completion_token_ids().end());
    absl::StatusOr<std::string> text = services_.tokenizer()->Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_TRUE(absl::StartsWith(
        *text,
        "<|start_header_id|>user<|end_header_id|>\n\nI am thinking of a whole number from 0 to "
        "18. You have 3 guesses. Answer with one number.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"))
        << *text;
    EXPECT_FALSE(absl::StrContains(*text, "<|im_start|>")) << *text;
    EXPECT_FALSE(absl::StrContains(*text, "<|begin_of_text|>")) << *text;
    // A later observation follows the model's turn (ended by the fake's eos, id 258) directly:
    // Llama 3 writes nothing between turns.
    num_followed += absl::StrContains(*text, "<|im_end|><|start_header_id|>user");
  }
  EXPECT_GT(num_followed, 0);
}

TEST_F(MultiTurnLoopTest, FailedEpisodesAreExcludedAndCounted) {
  FlakyEnvironment environment({.min = 0, .max = 18, .max_guesses = 3});
  const RlTotals totals = Run(environment, 2);
  const std::vector<v1::TrainStepRequest> batches = trainer_service_.batches();
  ASSERT_EQ(batches.size(), 2u);
  for (const v1::TrainStepRequest& batch : batches) {
    EXPECT_EQ(batch.rollouts_size(), 6);  // sample 0 of each prompt failed
  }
  EXPECT_EQ(totals.reward_items_sent, 16);
  EXPECT_EQ(totals.reward_items_failed, 4);
  EXPECT_EQ(totals.reward_items_scored, 12);
  for (const StepRecord& record : records_) {
    EXPECT_EQ(*record.reward_items_sent, *record.reward_items_scored + *record.reward_items_failed);
    EXPECT_EQ(*record.reward_items_failed, 2);
  }
}

TEST(TrainRolloutTest, SingleTurnSamplesGoThroughUnchanged) {
  v1::GenerateResponse sample;
  for (int t = 0; t < 3; ++t) {
    sample.add_token_ids(40 + t);
    sample.add_logprobs(-0.1f * t);
    sample.add_weight_versions(2 + t % 2);
  }
  v1::TrainStepRequest request;
  const v1::Rollout* rollout = AddTrainRollout({1, 2}, sample, 0.5, 7, &request);
  EXPECT_EQ(rollout->loss_mask_size(), 0);  // empty = all the model's
  EXPECT_EQ(rollout->weight_versions_size(), 3);
  EXPECT_EQ(rollout->weight_versions(1), 3);
  EXPECT_EQ(rollout->prompt_token_ids_size(), 2);
  EXPECT_EQ(rollout->advantage(), 0.5);
  EXPECT_EQ(rollout->group_id(), 7);
  EXPECT_EQ(NumModelTokens(sample), 3);
  EXPECT_EQ(NumEnvironmentTokens(sample), 0);
}

TEST(TrainRolloutTest, EpisodeTokensOfTheEnvironmentAreMaskedWithAKnownVersion) {
  rewards::EpisodeResult episode;
  episode.completion_tokens = {10, 11, 20, 21, 12, 22};
  episode.loss_mask = {0, 0, 1, 1, 0, 1};
  const float nan = std::nanf("");
  episode.logprobs = {nan, nan, -0.5f, -0.25f, nan, -1.0f};
  episode.weight_versions = {-1, -1, 4, 4, -1, 5};
  const v1::GenerateResponse sample = EpisodeToSample(episode, 2);
  EXPECT_EQ(sample.sample_index(), 2);
  EXPECT_EQ(ModelTokenVersions(sample), (std::vector<int64_t>{4, 4, 5}));
  EXPECT_EQ(NumEnvironmentTokens(sample), 3);
  v1::TrainStepRequest request;
  const v1::Rollout* rollout = AddTrainRollout({1}, sample, -1.0, 0, &request);
  ASSERT_EQ(rollout->loss_mask_size(), 6);
  const std::vector<bool> mask(rollout->loss_mask().begin(), rollout->loss_mask().end());
  EXPECT_EQ(mask, (std::vector<bool>{false, false, true, true, false, true}));
  EXPECT_EQ(
      std::vector<int64_t>(rollout->weight_versions().begin(), rollout->weight_versions().end()),
      (std::vector<int64_t>{4, 4, 4, 4, 4, 5}));
  EXPECT_TRUE(std::isnan(rollout->behaviour_logprobs(4)));
  EXPECT_EQ(rollout->behaviour_logprobs(3), -0.25f);
}

TEST(ValidUtf8Test, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(ValidUtf8("7 + \xC3\xA9"), "7 + \xC3\xA9");  // valid: unchanged
  EXPECT_EQ(ValidUtf8("12\xC3"), "12\xEF\xBF\xBD");      // stops inside a character
  EXPECT_EQ(ValidUtf8("\xFF\xFEx"), "\xEF\xBF\xBD\xEF\xBF\xBDx");
  EXPECT_EQ(ValidUtf8(""), "");
}

}  // namespace
}  // namespace lockstep::orchestrator
