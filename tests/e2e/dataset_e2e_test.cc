// End to end on the user's own model and data: `lockstep run` (real trainer and generator
// processes on loopback) on a bf16 Hugging Face style checkpoint with a chat JSONL whose fields
// are renamed and nested, a chat eval file, the chat template and stop tokens from the model's
// files, [logging] level, "no eval", and bad inputs stopped before any service starts.
//
// The Qwen3 and Llama 3 jobs use the real tokenizer.json / tokenizer_config.json files that
// scripts/fetch_tokenizers.sh puts under .cache/tokenizers (scripts/test.sh runs it first), in
// checkpoints with the real vocabulary and tiny layers. The other tests use `lockstep init-model`'s
// byte-level tokenizer.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_lockstep.h"
#include "tests/tokenizer/golden_files.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test_support::Outcome;
using test_support::ReadFile;
using test_support::RunLockstep;
using ::testing::HasSubstr;
using ::testing::Not;

// Word problems in a chat layout with custom names: the prompt under "conversations", the
// answer nested at reward_model.ground_truth (as verl keeps it), extra columns as metadata.
std::string ChatRows(int first, int count) {
  std::string rows;
  for (int i = first; i < first + count; ++i) {
    nlohmann::json row = {
        {"conversations",
         {{{"role", "system"}, {"content", "Answer with the number."}},
          {{"role", "user"}, {"content", absl::StrCat(i, "+", i % 5, "=")}}}},
        {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string(i + i % 5)}}},
        {"data_source", "sums"}};
    rows += row.dump() + "\n";
  }
  return rows;
}

// A case of tests/golden/tokenizer/chat_cases.json: messages and the string the family's
// Jinja chat_template renders for them (scripts/tokenizer_goldens.cjs).
nlohmann::json GoldenChatCase(const std::string& name) {
  const nlohmann::json cases = nlohmann::json::parse(ReadFile("tests/golden/tokenizer/chat_cases.json"));
  for (const nlohmann::json& c : cases) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no golden chat case " << name;
  return nlohmann::json::object();
}

// The real tokenizer's ids for a golden case's rendering (tests/golden/tokenizer/chat_ids.jsonl,
// in the order of chat_cases.json).
std::vector<int32_t> GoldenChatIds(const std::string& name) {
  for (const nlohmann::json& line :
       ::lockstep::testing::ReadJsonLines("tests/golden/tokenizer/chat_ids.jsonl")) {
    if (line["name"] == name) return line["ids"].get<std::vector<int32_t>>();
  }
  ADD_FAILURE() << "no golden chat ids " << name;
  return {};
}

// train.jsonl with the golden case's messages as its first row, then 7 more.
void WriteTrainStartingWith(const fs::path& path, const nlohmann::json& golden) {
  nlohmann::json row = {{"conversations", golden["messages"]},
                        {"reward_model", {{"ground_truth", "4"}}}};
  std::ofstream(path) << row.dump() << "\n" << ChatRows(2, 7);
}

class DatasetE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::FreshTestDirectory("lockstep_dataset_e2e");
    std::ofstream(root_ / "train.jsonl") << ChatRows(1, 8);
    std::ofstream(root_ / "eval.jsonl") << ChatRows(20, 3);
  }
  void TearDown() override { fs::remove_all(root_); }

  // `lockstep init-model` into root_/name with bf16 weights.
  fs::path InitModel(const std::string& name, const std::string& arch) {
    const fs::path dir = root_ / name;
    Outcome init = RunLockstep({"init-model", "--arch", arch, "--preset", "tiny", "--dtype",
                                "bfloat16", "--out", dir.string(), "--seed", "5"},
                               root_ / (name + "_init.log"));
    EXPECT_EQ(init.exit_code, 0) << init.output;
    return dir;
  }

  // A checkpoint shaped like the real family's (its vocab_size, bos/eos ids, bf16 storage) with
  // tiny layers, and the family's real tokenizer files copied in.
  fs::path WriteReferenceModel(const std::string& family, ModelConfig config) {
    const fs::path tokenizers = ::lockstep::testing::ReferenceTokenizerDir(family);
    EXPECT_TRUE(fs::exists(tokenizers / "tokenizer.json"))
        << "no " << tokenizers << ": run scripts/fetch_tokenizers.sh";
    config.hidden_size = 64, config.intermediate_size = 128, config.num_hidden_layers = 2;
    config.num_attention_heads = 4, config.num_key_value_heads = 2, config.head_dim = 16;
    config.torch_dtype = StorageDtype::kBFloat16;
    const fs::path dir = root_ / family;
    std::shared_ptr<Transformer> model = CreateRandomModel(config, /*seed=*/5);
    if (family == "llama3") FavourToken(*model, kLlama3EotId);
    EXPECT_TRUE(SaveModel(*model, dir).ok());
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(tokenizers / file, dir / file, fs::copy_options::overwrite_existing);
    }
    return dir;
  }

  // Makes `id` the model's next token whatever the context, with probability ~1: residual
  // dimension 0 is a constant 100 (every embedding row has it, no layer writes to it) that
  // dwarfs the others (~1), so the final norm's output is ~sqrt(hidden_size) there for every
  // token, and only lm_head's row `id` weighs it (logit ~32 against ~0). The layers still
  // compute on the other dimensions.
  static void FavourToken(Transformer& model, int64_t id) {
    torch::NoGradGuard no_grad;
    TensorMap weights = StateDict(model);
    weights.at("model.embed_tokens.weight").select(1, 0).fill_(100.0);
    for (auto& [name, tensor] : weights) {
      if (absl::EndsWith(name, "o_proj.weight") || absl::EndsWith(name, "down_proj.weight")) {
        tensor.select(0, 0).zero_();
      }
    }
    torch::Tensor head = weights.at("lm_head.weight");
    head.select(1, 0).zero_();
    head.select(0, id).select(0, 0).fill_(4.0);
  }

  static constexpr int64_t kLlama3EotId = 128009;

  fs::path WriteJob(const fs::path& model, const std::string& extra = "") {
    const fs::path job = root_ / "job.toml";
    std::ofstream(job) << absl::StrCat(R"(
[job]
steps = 2
seed = 4
output_root = ")", root_.string(), R"("
[model]
path = ")", model.string(), R"("
mode = "batch_invariant"
[data]
train_file = ")", (root_ / "train.jsonl").string(), R"("
eval_file = ")", (root_ / "eval.jsonl").string(), R"("
prompt_field = "conversations"
answer_field = "reward_model.ground_truth"
[generator]
max_tokens = 6
[algorithm]
prompts_per_step = 2
samples_per_prompt = 2
drop_zero_variance_groups = false
[parity]
mode = "strict"
[logging]
progress = false
)", extra);
    return job;
  }

  Outcome Run(const fs::path& job, const std::string& name, std::vector<std::string> sets = {}) {
    std::vector<std::string> args = {"run", job.string(), "--name", name};
    for (const std::string& set : sets) {
      args.push_back("--set");
      args.push_back(set);
    }
    return RunLockstep(args, root_ / (name + ".log"));
  }

  fs::path root_;
};

// What `lockstep data check` prints for the first row of `train`: its rendering and the number
// of tokens the job's tokenizer encodes it to.
std::string DataCheckFirstRow(const fs::path& train, const fs::path& job, const fs::path& log) {
  Outcome check = RunLockstep({"data", "check", train.string(), "--config", job.string(),
                               "--rows", "1"},
                              log);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  return check.output;
}

TEST_F(DatasetE2eTest, Qwen3ChatJobWithNestedFieldsTrainsEvaluatesAndPrintsAtTheLevel) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.vocab_size = 151936, config.bos_token_id = 151643, config.eos_token_id = 151645;
  const fs::path model = WriteReferenceModel("qwen3", config);
  const fs::path job = WriteJob(model);
  const nlohmann::json golden = GoldenChatCase("qwen3_system_user");
  WriteTrainStartingWith(root_ / "train.jsonl", golden);
  Outcome debug = Run(job, "debug", {"logging.level=debug"});
  ASSERT_EQ(debug.exit_code, 0) << debug.output;
  // The reference rendering of Qwen3's chat_template (the golden) for the first rows, and the
  // real tokenizer's ids for it (as many as the reference tokenizer gives).
  EXPECT_THAT(debug.output, HasSubstr("lockstep run: first train prompt: " +
                                      golden["expected"].get<std::string>()));
  EXPECT_THAT(debug.output, HasSubstr("lockstep run: first eval prompt: <|im_start|>system\n"
                                      "Answer with the number.<|im_end|>\n<|im_start|>user\n"
                                      "20+0=<|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_THAT(debug.output, HasSubstr("chat template qwen3 (" +
                                      (model / "tokenizer_config.json").string() +
                                      "), plain prompts templated, stop tokens [151645 <|im_end|>, "
                                      "151643 <|endoftext|>]"));
  EXPECT_THAT(DataCheckFirstRow(root_ / "train.jsonl", job, root_ / "check.log"),
              HasSubstr(absl::StrCat("prompt (", GoldenChatIds("qwen3_system_user").size(),
                                     " tokens):\n", golden["expected"].get<std::string>())));
  nlohmann::json summary = nlohmann::json::parse(ReadFile(root_ / "debug" / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 2);
  EXPECT_GT(summary["parity_tokens_compared"].get<int64_t>(), 0);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  EXPECT_EQ(summary["held_out_eval"], true);
  EXPECT_EQ(summary["eval_before"]["num_prompts"], 3);
  EXPECT_EQ(summary["eval_before_run"], 1);
  EXPECT_EQ(summary["eval_after"]["num_prompts"], 3);
  EXPECT_EQ(summary["reward_items_failed"], 0);
  EXPECT_THAT(debug.output, HasSubstr("(run 1, before step 1)"));
  EXPECT_THAT(debug.output, HasSubstr("(run 1, after step 2)"));

  // At "warning" the orchestrator's info lines are gone; with eval_size 0 there is no eval and
  // the summary says so instead of an accuracy of 0.
  Outcome quiet = Run(job, "quiet", {"logging.level=warning", "data.eval_size=0", "job.steps=1"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, Not(HasSubstr("lockstep run:")));
  EXPECT_THAT(quiet.output, HasSubstr("no eval (no eval set, or eval_size 0)"));
  EXPECT_THAT(quiet.output, Not(HasSubstr("held-out accuracy before RL")));
  nlohmann::json quiet_summary = nlohmann::json::parse(ReadFile(root_ / "quiet" / "summary.json"));
  EXPECT_EQ(quiet_summary["held_out_eval"], false);
  EXPECT_EQ(quiet_summary["parity_tokens_mismatched"], 0);
}

TEST_F(DatasetE2eTest, Llama3ModelGetsTheLlama3TemplateAndStopsOnEotId) {
  // Llama 3 Instruct's ids; its generation_config.json ends a reply on <|end_of_text|> or
  // <|eot_id|>, and sets the sampling defaults ([generator] keys of the job would win).
  ModelConfig config = *PresetConfig(Architecture::kLlama, "tiny");
  config.vocab_size = 128256, config.bos_token_id = 128000, config.eos_token_id = 128009;
  const fs::path model = WriteReferenceModel("llama3", config);
  std::ofstream(model / "generation_config.json")
      << R"({"bos_token_id": 128000, "eos_token_id": [128001, 128009], "temperature": 0.5,)"
      << R"( "top_k": 5})";

  const nlohmann::json golden = GoldenChatCase("llama3_multi_turn_trimmed");
  WriteTrainStartingWith(root_ / "train.jsonl", golden);
  const fs::path job = WriteJob(model);
  Outcome run = Run(job, "llama", {"logging.level=debug", "sft.steps=2", "sft.batch_size=4"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The reference rendering of Llama 3's chat_template (the golden), and the real tokenizer's
  // ids for it.
  EXPECT_THAT(run.output, HasSubstr("lockstep run: first train prompt: " +
                                    golden["expected"].get<std::string>()));
  EXPECT_THAT(run.output,
              HasSubstr("lockstep run: first eval prompt: <|begin_of_text|><|start_header_id|>"
                        "system<|end_header_id|>\n\nAnswer with the number.<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\n20+0=<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n"));
  EXPECT_THAT(DataCheckFirstRow(root_ / "train.jsonl", job, root_ / "check.log"),
              HasSubstr(absl::StrCat("prompt (", GoldenChatIds("llama3_multi_turn_trimmed").size(),
                                     " tokens):\n", golden["expected"].get<std::string>())));
  EXPECT_THAT(run.output, HasSubstr("chat template llama3 (" +
                                    (model / "tokenizer_config.json").string() +
                                    "), plain prompts templated, stop tokens [128009 <|eot_id|>, "
                                    "128001 <|end_of_text|>]"));
  EXPECT_THAT(run.output, Not(HasSubstr("im_end")));
  const std::string resolved = ReadFile(root_ / "llama" / "config.toml");
  EXPECT_THAT(resolved, HasSubstr("temperature = 0.5"));
  EXPECT_THAT(resolved, HasSubstr("top_k = 5"));
  EXPECT_THAT(ReadFile(root_ / "llama" / "trainer_options.json"), HasSubstr("\"temperature\": 0.5"));
  nlohmann::json summary = nlohmann::json::parse(ReadFile(root_ / "llama" / "summary.json"));
  EXPECT_EQ(summary["rl_steps"], 2);
  EXPECT_GT(summary["parity_tokens_compared"].get<int64_t>(), 0);
  EXPECT_EQ(summary["parity_tokens_mismatched"], 0);
  EXPECT_EQ(summary["eval_after"]["num_prompts"], 3);
  // The model samples <|eot_id|> first (FavourToken): every completion is that one token, so the
  // generator stopped on it; were it not a stop token, each would run to max_tokens (6).
  int num_steps = 0;
  std::istringstream metrics(ReadFile(root_ / "llama" / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (!record.contains("gen_tokens")) continue;
    ++num_steps;
    EXPECT_EQ(record["samples"], 4) << line;
    EXPECT_EQ(record["gen_tokens"], 4) << line;
  }
  EXPECT_EQ(num_steps, 2);
}

TEST_F(DatasetE2eTest, BadInputsStopBeforeAnyServiceStarts) {
  const fs::path model = InitModel("qwen3", "qwen3");
  const fs::path job = WriteJob(model);
  const auto expect_stopped = [&](const std::string& name, const Outcome& outcome,
                                  const std::string& expected) {
    EXPECT_NE(outcome.exit_code, 0) << name;
    EXPECT_THAT(outcome.output, HasSubstr(expected)) << name;
    EXPECT_FALSE(fs::exists(root_ / name / "logs" / "trainer.log")) << name;
  };
  // A row without the mapped field, and a line that is not UTF-8.
  std::ofstream(root_ / "bad.jsonl") << ChatRows(1, 2)
                                     << R"({"conversations": [{"role": "user", "content": "x"}]})"
                                     << "\n{\"conversations\": \"caf\xE9\"}\n";
  expect_stopped("rows",
                 Run(job, "rows", {absl::StrCat("data.train_file=\"",
                                                (root_ / "bad.jsonl").string(), "\"")}),
                 (root_ / "bad.jsonl").string() +
                     ":3: missing field 'reward_model.ground_truth' (data.answer_field)");
  EXPECT_THAT(ReadFile(root_ / "rows.log"),
              HasSubstr((root_ / "bad.jsonl").string() + ":4: not valid UTF-8"));
  // A chat template we do not know.
  nlohmann::json config = nlohmann::json::parse(ReadFile(model / "tokenizer_config.json"));
  config["chat_template"] = "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}";
  std::ofstream(model / "tokenizer_config.json") << config.dump();
  expect_stopped("template", Run(job, "template"),
                 (model / "tokenizer_config.json").string() + ": unrecognised chat_template");
  // ... which an explicit family overrides.
  // A tokenizer larger than the model's embedding (512 ids).
  nlohmann::json tokenizer = nlohmann::json::parse(ReadFile(model / "tokenizer.json"));
  tokenizer["added_tokens"].push_back({{"id", 600},
                                       {"content", "<|extra|>"},
                                       {"single_word", false},
                                       {"lstrip", false},
                                       {"rstrip", false},
                                       {"normalized", false},
                                       {"special", true}});
  std::ofstream(model / "tokenizer.json") << tokenizer.dump();
  expect_stopped("vocab", Run(job, "vocab", {"tokenizer.chat_template=qwen3"}),
                 "more than the model's embedding (vocab_size 512");
  // The real Qwen3 tokenizer next to a model built for a 512-id vocabulary.
  const fs::path reference = ::lockstep::testing::ReferenceTokenizerDir("qwen3");
  fs::copy_file(reference / "tokenizer.json", model / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(reference / "tokenizer_config.json", model / "tokenizer_config.json",
                fs::copy_options::overwrite_existing);
  expect_stopped("reference", Run(job, "reference"),
                 "the tokenizer has 151669 ids, more than the model's embedding (vocab_size 512");
  // No tokenizer files at all.
  fs::remove(model / "tokenizer.json");
  fs::remove(model / "tokenizer_config.json");
  expect_stopped("missing", Run(job, "missing"), "tokenizer.json");
}

TEST_F(DatasetE2eTest, DataCheckPrintsTheFirstRowsAsTheModelSeesThem) {
  const fs::path model = InitModel("qwen3", "qwen3");
  const fs::path job = WriteJob(model);
  const fs::path train = root_ / "train.jsonl";
  Outcome check = RunLockstep({"data", "check", train.string(), "--config", job.string(),
                               "--rows", "2"},
                              root_ / "check.log");
  ASSERT_EQ(check.exit_code, 0) << check.output;
  const std::string first_prompt =
      "<|im_start|>system\nAnswer with the number.<|im_end|>\n<|im_start|>user\n1+1=<|im_end|>\n"
      "<|im_start|>assistant\n";
  std::unique_ptr<Tokenizer> tokenizer = *Tokenizer::FromFile(model);
  const size_t num_tokens = tokenizer->Encode(first_prompt)->size();
  EXPECT_THAT(check.output, HasSubstr(train.string() + ": 8 rows, prompt_field \"conversations\", "
                                      "answer_field \"reward_model.ground_truth\""));
  EXPECT_THAT(check.output, HasSubstr("chat template qwen3"));
  EXPECT_THAT(check.output, HasSubstr(absl::StrCat("--- ", train.string(), ":1 ---\nprompt (",
                                                   num_tokens, " tokens):\n", first_prompt,
                                                   "\nanswer: 2\nmetadata: ")));
  EXPECT_THAT(check.output, HasSubstr("\"data_source\":\"sums\""));
  EXPECT_THAT(check.output, HasSubstr(train.string() + ":2 ---"));
  EXPECT_THAT(check.output, Not(HasSubstr(train.string() + ":3 ---")));
  // Plain prompts are templated unless data.apply_chat_template = false.
  std::ofstream(root_ / "plain.jsonl") << R"({"prompt": "2+2?", "answer": "4"})" << "\n";
  const std::vector<std::string> plain = {"data", "check", (root_ / "plain.jsonl").string(),
                                          "--config", job.string(), "--set",
                                          "data.prompt_field=prompt", "--set",
                                          "data.answer_field=answer"};
  Outcome templated = RunLockstep(plain, root_ / "templated.log");
  ASSERT_EQ(templated.exit_code, 0) << templated.output;
  EXPECT_THAT(templated.output,
              HasSubstr("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n\nanswer: 4"));
  std::vector<std::string> raw_args = plain;
  raw_args.insert(raw_args.end(), {"--set", "data.apply_chat_template=false"});
  Outcome raw = RunLockstep(raw_args, root_ / "raw.log");
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_THAT(raw.output, HasSubstr("prompt (4 tokens):\n2+2?\nanswer: 4"));
  // A bad file names every bad row and exits 1.
  std::ofstream(root_ / "bad.jsonl") << ChatRows(1, 1) << "{\"conversations\": 3}\n";
  Outcome bad = RunLockstep({"data", "check", (root_ / "bad.jsonl").string(), "--config",
                             job.string()},
                            root_ / "bad.log");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr((root_ / "bad.jsonl").string() +
                                    ":2: 'conversations' is neither a string nor"));
}

}  // namespace
}  // namespace lockstep
