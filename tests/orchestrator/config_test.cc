// Job config: defaults, located errors (unknown key, wrong type, missing file, impossible
// combinations), --set overrides, and the resolved config's round trip.
#include "orchestrator/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#ifndef LOCKSTEP_SOURCE_DIR
#error "LOCKSTEP_SOURCE_DIR must name the source tree"
#endif

namespace lockstep::orchestrator {
namespace {

using ::testing::HasSubstr;

// The smallest valid recipe: a preset model on the built-in task.
constexpr char kMinimal[] = R"(
[model]
preset = "tiny"

[data]
task = "arithmetic"
)";

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/config_test_XXXXXX";
  char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigTest, MinimalRecipeGetsDefaults) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(kMinimal, "recipe.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.preset, "tiny");
  EXPECT_EQ(config->model.mode, "batch_invariant");
  EXPECT_EQ(config->parity.mode, "strict");
  EXPECT_EQ(config->generator.count, 1);
  EXPECT_EQ(config->rewards.builtin, "math");
  EXPECT_EQ(config->job.output_root, "runs");
  EXPECT_EQ(config->algorithm.samples_per_prompt, 8);
}

TEST(ConfigTest, UnknownKeyNamesFileLineAndSuggestsClosest) {
  std::string text = std::string(kMinimal) + "\n[algorithm]\nsample_per_prompt = 4\n";
  absl::StatusOr<JobConfig> config = ParseJobConfig(text, "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("recipe.toml:9: [algorithm] unknown key "
                                                   "'sample_per_prompt'; did you mean "
                                                   "'samples_per_prompt'?"));
}

TEST(ConfigTest, UnknownSectionAndTopLevelKeyAreNamed) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      std::string("steps = 3\n") + kMinimal + "[algorithms]\nloss = \"grpo\"\n", "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("2 config errors"));
  EXPECT_THAT(config.status().message(),
              HasSubstr("recipe.toml:1: unknown section 'steps'; did you mean 'steps' in [job]?"));
  EXPECT_THAT(config.status().message(),
              HasSubstr("unknown section 'algorithms'; did you mean 'algorithm'?"));
}

TEST(ConfigTest, WrongTypeNamesKeyAndTypes) {
  std::string text = std::string(kMinimal) + "[job]\nsteps = \"ten\"\n";
  absl::StatusOr<JobConfig> config = ParseJobConfig(text, "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("recipe.toml:8: [job] steps: expected an integer, got a string"));
}

TEST(ConfigTest, SyntaxErrorHasLine) {
  absl::StatusOr<JobConfig> config = ParseJobConfig("[job]\nname = \n", "broken.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("broken.toml:2: TOML syntax error"));
}

TEST(ConfigTest, MissingConfigFileIsNotFound) {
  absl::StatusOr<JobConfig> config = LoadJobConfig("/nonexistent/job.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/job.toml"));
}

TEST(ConfigTest, MissingReferencedFileIsNamed) {
  std::string text = "[model]\npreset = \"tiny\"\n[data]\ntrain_file = \"/nonexistent/t.jsonl\"\n";
  absl::StatusOr<JobConfig> config = ParseJobConfig(text, "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("recipe.toml:4: [data] train_file: file not found: /nonexistent/t.jsonl"));
}

TEST(ConfigTest, StrictParityNeedsBatchInvariantMode) {
  std::string text = std::string(kMinimal) + "[parity]\nmode = \"strict\"\n";
  text.replace(text.find("preset"), 0, "mode = \"fast\"\n");
  absl::StatusOr<JobConfig> config = ParseJobConfig(text, "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("recipe.toml:9: [parity] mode: \"strict\" "
                                                   "needs [model] mode = \"batch_invariant\""));
  EXPECT_THAT(config.status().message(), HasSubstr("(recipe.toml:3)"));

  // The same mode with parity reporting only is fine.
  text.replace(text.find("\"strict\""), 8, "\"report\"");
  EXPECT_TRUE(ParseJobConfig(text, "recipe.toml").ok());
}

TEST(ConfigTest, ImpossibleCombinationsAreRejected) {
  struct Case {
    std::string extra;
    std::string expected;
  };
  const Case cases[] = {
      {"[generator]\ncount = 0\n", "[generator] count: 0 generators and no [generator] addresses"},
      {"[algorithm]\nsamples_per_prompt = 1\n",
       "[algorithm] samples_per_prompt: must be >= 2 with the group advantage \"grpo\""},
      {"[algorithm]\naggregation = \"constant\"\nconstant_normalizer = 0\n",
       "recipe.toml:9: [algorithm] constant_normalizer: must be > 0"},
      {"[trainer]\nschedule = \"cosine\"\nwarmup_steps = 100\n",
       "[trainer] warmup_steps: 100 leaves no decay for the cosine schedule"},
      {"[rewards]\nbuiltin = \"\"\n", "[rewards] builtin: no reward"},
      {"[rewards]\nbuiltin = \"no_such_reward\"\n", "no_such_reward"},
      {"[[rewards.servers]]\ncommand = [\"x\"]\naddress = \"127.0.0.1:1\"\n",
       "[rewards.servers[0]] command: give exactly one of command and address"},
      {"[generator]\ntop_p = 1.5\n", "[generator] top_p: must be in (0, 1]"},
      {"[trainer]\nschedule = \"cosin\"\n", "[trainer] schedule: must be one of"},
  };
  for (const Case& c : cases) {
    std::string text = std::string(kMinimal) + c.extra;
    absl::StatusOr<JobConfig> config = ParseJobConfig(text, "recipe.toml");
    ASSERT_FALSE(config.ok()) << c.extra;
    EXPECT_THAT(config.status().message(), HasSubstr(c.expected)) << c.extra;
  }

  std::string both = kMinimal;
  both.replace(both.find("preset"), 0, "path = \"/tmp\"\n");
  absl::StatusOr<JobConfig> config = ParseJobConfig(both, "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("give exactly one of [model] preset and [model] path"));
}

TEST(ConfigTest, WeightSyncTransportTakesTheGpuTransportsAndNamesTheKeyOtherwise) {
  for (const std::string transport : {"auto", "gloo", "shm", "nccl", "cuda_ipc"}) {
    absl::StatusOr<JobConfig> config = ParseJobConfig(
        std::string(kMinimal) + "[weight_sync]\ntransport = \"" + transport + "\"\n",
        "recipe.toml");
    ASSERT_TRUE(config.ok()) << transport << ": " << config.status();
    EXPECT_EQ(config->weight_sync.transport, transport);
  }
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      std::string(kMinimal) + "[weight_sync]\ntransport = \"nvlink\"\n", "recipe.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("[weight_sync] transport: must be one of \"auto\", \"gloo\", \"shm\", "
                        "\"nccl\", \"cuda_ipc\", got \"nvlink\""));
}

TEST(ConfigTest, GeneratorAddressesSetTheCount) {
  std::string text =
      std::string(kMinimal) + "[generator]\naddresses = [\"127.0.0.1:5001\", \"127.0.0.1:5002\"]\n";
  absl::StatusOr<JobConfig> config = ParseJobConfig(text, "recipe.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->generator.count, 2);
}

TEST(ConfigTest, SetOverridesApplyInOrderAndAreNamedInErrors) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig(kMinimal, "recipe.toml",
                     {"job.steps=7", "job.name=my_run", "trainer.betas=[0.8, 0.9]", "job.steps=9",
                      "rewards.options.tolerance=0.5"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->job.steps, 9);
  EXPECT_EQ(config->job.name, "my_run");
  EXPECT_EQ(config->trainer.betas, (std::vector<double>{0.8, 0.9}));
  EXPECT_DOUBLE_EQ(config->rewards.options["tolerance"].get<double>(), 0.5);

  absl::StatusOr<JobConfig> wrong = ParseJobConfig(kMinimal, "recipe.toml", {"job.steps=ten"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("--set job.steps=ten: [job] steps: expected an integer, got a string"));

  absl::StatusOr<JobConfig> unknown = ParseJobConfig(kMinimal, "recipe.toml", {"job.stpes=3"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("--set job.stpes=3: [job] unknown key 'stpes'; did you mean 'steps'?"));

  EXPECT_FALSE(ParseJobConfig(kMinimal, "recipe.toml", {"steps"}).ok());
  EXPECT_FALSE(ParseJobConfig(kMinimal, "recipe.toml", {"steps=3"}).ok());
}

TEST(ConfigTest, ResolvedConfigRoundTrips) {
  std::string dir = TempDir();
  std::string train =
      WriteFile(dir + "/train.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n");
  std::string text = R"(
[job]
name = "round_trip"
seed = 42
steps = 17
[model]
preset = "tiny"
mode = "fast"
[data]
train_file = ")" + train +
                     R"("
eval_size = 33
[trainer]
lr = 3.5e-5
betas = [0.85, 0.95]
schedule = "cosine"
[algorithm]
advantage = "rloo"
loss = "gspo"
clip_eps_high = 0.28
drop_zero_variance_groups = false
[rewards]
builtin = "regex"
options = { pattern = "^[0-9]+$", match_reward = 2 }
[[rewards.servers]]
name = "judge"
command = ["python3", "judge.py"]
weight = 0.5
[parity]
mode = "report"
[async]
max_staleness = 2
[logging]
progress = false
)";
  absl::StatusOr<JobConfig> first = ParseJobConfig(text, "recipe.toml");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(WriteResolvedConfig(*first, dir + "/config.toml").ok());
  absl::StatusOr<JobConfig> second = LoadJobConfig(dir + "/config.toml");
  ASSERT_TRUE(second.ok()) << second.status();

  EXPECT_EQ(second->job.seed, 42);
  EXPECT_EQ(second->job.steps, 17);
  EXPECT_EQ(second->model.mode, "fast");
  EXPECT_EQ(second->data.train_file, train);
  EXPECT_EQ(second->data.eval_size, 33);
  EXPECT_EQ(second->trainer.lr, 3.5e-5);
  EXPECT_EQ(second->trainer.betas, (std::vector<double>{0.85, 0.95}));
  EXPECT_EQ(second->algorithm.advantage, "rloo");
  EXPECT_EQ(second->algorithm.clip_eps_high, 0.28);
  EXPECT_FALSE(second->algorithm.drop_zero_variance_groups);
  EXPECT_EQ(second->rewards.options, first->rewards.options);
  ASSERT_EQ(second->rewards.servers.size(), 1u);
  EXPECT_EQ(second->rewards.servers[0].name, "judge");
  EXPECT_EQ(second->rewards.servers[0].command, (std::vector<std::string>{"python3", "judge.py"}));
  EXPECT_EQ(second->rewards.servers[0].weight, 0.5);
  EXPECT_EQ(second->async.max_staleness, 2);
  EXPECT_FALSE(second->logging.progress);
  // Everything else too: the second resolution reads exactly as the first.
  JobConfig a = *first, b = *second;
  a.source = b.source = "";
  EXPECT_EQ(ResolvedConfigToml(a), ResolvedConfigToml(b));
}

TEST(ConfigTest, PromptFormatAndFieldKeysAreReadCheckedAndWritten) {
  std::string dir = TempDir();
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      kMinimal, "recipe.toml",
      {"tokenizer.chat_template=llama3", "tokenizer.enable_thinking=false",
       "data.apply_chat_template=false", "data.prompt_field=conversations",
       "data.answer_field=reward_model.ground_truth", "logging.level=warning"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tokenizer.chat_template, "llama3");
  EXPECT_FALSE(config->tokenizer.enable_thinking);
  EXPECT_FALSE(config->data.apply_chat_template);
  ASSERT_TRUE(WriteResolvedConfig(*config, dir + "/config.toml").ok());
  absl::StatusOr<JobConfig> again = LoadJobConfig(dir + "/config.toml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tokenizer.chat_template, "llama3");
  EXPECT_FALSE(again->tokenizer.enable_thinking);
  EXPECT_FALSE(again->data.apply_chat_template);
  EXPECT_EQ(again->data.prompt_field, "conversations");
  EXPECT_EQ(again->data.answer_field, "reward_model.ground_truth");
  EXPECT_EQ(again->logging.level, "warning");

  absl::StatusOr<JobConfig> unknown =
      ParseJobConfig(kMinimal, "recipe.toml", {"tokenizer.chat_template=mistral"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("tokenizer.chat_template"));
  // model.dtype is gone: both services compute in float32 (configs/README.md says why).
  absl::StatusOr<JobConfig> dtype =
      ParseJobConfig(kMinimal, "recipe.toml", {"model.dtype=bfloat16"});
  ASSERT_FALSE(dtype.ok());
  EXPECT_THAT(std::string(dtype.status().message()), HasSubstr("dtype"));
}

TEST(ConfigTest, TrainerOptionsCarryTheTrainerKeys) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig(kMinimal, "recipe.toml",
                     {"trainer.lr=2e-5", "job.steps=12", "algorithm.moe_aux_loss_coef=0.25",
                      "algorithm.moe_z_loss_coef=0.5"});
  ASSERT_TRUE(config.ok()) << config.status();
  nlohmann::json options = TrainerOptionsJson(*config, "runs/x/checkpoints");
  for (const char* key : {"mode",
                          "lr",
                          "betas",
                          "eps",
                          "weight_decay",
                          "grad_clip",
                          "warmup_steps",
                          "total_steps",
                          "schedule",
                          "min_lr_ratio",
                          "micro_batch_tokens",
                          "max_sequence_length",
                          "loss",
                          "clip_eps_low",
                          "clip_eps_high",
                          "log_ratio_clamp",
                          "aggregation",
                          "constant_normalizer",
                          "tis_cap",
                          "kl_coef",
                          "moe_aux_loss_coef",
                          "moe_z_loss_coef",
                          "temperature",
                          "checkpoint_dir",
                          "keep_last",
                          "seed"}) {
    EXPECT_TRUE(options.contains(key)) << key;
  }
  EXPECT_EQ(options["lr"].get<double>(), 2e-5);
  EXPECT_EQ(options["total_steps"].get<int64_t>(), 12);
  EXPECT_EQ(options["checkpoint_dir"], "runs/x/checkpoints");
  EXPECT_EQ(options["mode"], "batch_invariant");
  EXPECT_EQ(options["moe_aux_loss_coef"].get<double>(), 0.25);
  EXPECT_EQ(options["moe_z_loss_coef"].get<double>(), 0.5);
}

// Every shipped recipe loads, and its resolved form loads back to the same config.
TEST(ConfigTest, EveryRecipeInConfigsLoads) {
  int recipes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(LOCKSTEP_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".toml") continue;
    ++recipes;
    absl::StatusOr<JobConfig> config = LoadJobConfig(entry.path().string());
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<JobConfig> again = ParseJobConfig(ResolvedConfigToml(*config), "resolved");
    ASSERT_TRUE(again.ok()) << entry.path() << ": " << again.status();
    again->source = config->source;
    EXPECT_EQ(ResolvedConfigToml(*again), ResolvedConfigToml(*config)) << entry.path();
  }
  EXPECT_GT(recipes, 0);
}

}  // namespace
}  // namespace lockstep::orchestrator
