// `lockstep diagnose` as a process: exit codes (0 identical, 1 different, 2 bad input), the
// JSON contract, the HTML file, and bad input named with nothing written.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_lockstep.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test_support::ReadFile;
using test_support::RunLockstep;

class DiagnoseCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() / ("diagnose_cli_" + std::to_string(getpid())));
    fs::create_directories(*root_);
    const auto init = RunLockstep({"init-model", "--arch", "qwen3", "--preset", "tiny", "--out",
                                   (*root_ / "model").string(), "--seed", "5"},
                                  *root_ / "init.log");
    ASSERT_EQ(init.exit_code, 0) << init.output;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }

  static test_support::Outcome Diagnose(std::vector<std::string> args) {
    args.insert(args.begin(), "diagnose");
    return RunLockstep(args, *root_ / "diagnose.log");
  }
  static std::string Model() { return (*root_ / "model").string(); }
  static std::string Tokens(int64_t n, int64_t seed) {
    std::string text;
    for (int64_t i = 0; i < n; ++i) {
      text += (i ? "," : "") + std::to_string((seed * 131 + i * 37) % 500);
    }
    return text;
  }

  static fs::path* root_;
};
fs::path* DiagnoseCliTest::root_ = nullptr;

TEST_F(DiagnoseCliTest, BatchInvariantTrainerAndGeneratorAgreeAndExitZero) {
  const fs::path json = *root_ / "same.json", html = *root_ / "same.html";
  const auto run = Diagnose({"--model", Model(), "--tokens", Tokens(20, 1), "--tokens",
                             Tokens(13, 2), "--b", "batch=2,chunk=4", "--json", json.string(),
                             "--html", html.string()});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("verdict: identical in every bit"), std::string::npos) << run.output;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  EXPECT_TRUE(report["identical"].get<bool>());
  EXPECT_EQ(report["tokens_compared"].get<int64_t>(), 10 + 7);
  EXPECT_EQ(report["tokens_differing"].get<int64_t>(), 0);
  EXPECT_EQ(report["max_abs_logprob_diff"].get<double>(), 0.0);
  EXPECT_EQ(report["vocab"]["max_kl"].get<double>(), 0.0);
  EXPECT_EQ(report["vocab"]["top1_agreement"].get<double>(), 1.0);
  EXPECT_TRUE(report["first_divergence"].is_null());
  ASSERT_FALSE(report["ops"].empty());
  for (const auto& op : report["ops"]) EXPECT_EQ(op["max_abs_diff"].get<double>(), 0.0) << op;
  const std::string page = ReadFile(html);
  EXPECT_NE(page.find("identical in every bit"), std::string::npos);
  EXPECT_NE(page.find("<table class=heat>"), std::string::npos);
}

TEST_F(DiagnoseCliTest, FastAgainstBatchInvariantExitsOneAndNamesTheOp) {
  const fs::path json = *root_ / "differ.json";
  const auto run = Diagnose({"--model", Model(), "--tokens", Tokens(80, 3), "--a", "mode=fast",
                             "--json", json.string()});
  ASSERT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("first divergence: sequence 0"), std::string::npos) << run.output;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  EXPECT_FALSE(report["identical"].get<bool>());
  ASSERT_TRUE(report["first_divergence"].is_object());
  const nlohmann::json& first = report["first_divergence"];
  EXPECT_TRUE(first["inputs_identical"].get<bool>());
  EXPECT_GE(first["layer"].get<int64_t>(), 0);
  EXPECT_FALSE(first["op"].get<std::string>().empty());
  EXPECT_EQ(first["sequence"].get<int64_t>(), 0);
}

// The HTML report of a real difference renders in headless Chromium (installed by
// scripts/test.sh; never skipped) into a page that is not blank: the heat map, tables and bars.
TEST_F(DiagnoseCliTest, HtmlReportRendersInHeadlessChromium) {
  const fs::path html = *root_ / "differ.html", png = *root_ / "differ.png";
  const auto run = Diagnose({"--model", Model(), "--tokens", Tokens(40, 7), "--a", "mode=fast",
                             "--html", html.string()});
  ASSERT_EQ(run.exit_code, 1) << run.output;
  const std::string page = ReadFile(html);
  EXPECT_NE(page.find("<table class=heat>"), std::string::npos);
  EXPECT_NE(page.find("<th>attention</th>"), std::string::npos) << "ops are the heat map's rows";
  const std::string command =
      "WINDOW_SIZE=1200,1600 " LOCKSTEP_SOURCE_DIR "/scripts/render_report.sh " + html.string() +
      " " + png.string() + " > " + (*root_ / "render.log").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile(*root_ / "render.log");
  const std::string image = ReadFile(png);
  ASSERT_GE(image.size(), 24u);
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // A blank page of this size is about 9 KB as PNG; this report is over 100 KB.
  EXPECT_GT(image.size(), 40000u) << "the screenshot looks empty";
}

TEST_F(DiagnoseCliTest, BadInputExitsTwoNamesTheProblemAndWritesNothing) {
  const fs::path json = *root_ / "never.json";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  // A model whose vocabulary is smaller than its tokenizer's.
  const fs::path small = *root_ / "small_vocab";
  fs::create_directories(small);
  fs::copy(*root_ / "model", small, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  nlohmann::json config = nlohmann::json::parse(ReadFile(small / "config.json"));
  config["vocab_size"] = 258;  // holds bos/eos 256, not the tokenizer's 261 ids
  std::ofstream(small / "config.json") << config.dump();
  const fs::path prompts = *root_ / "prompts.jsonl";
  std::ofstream(prompts) << R"({"prompt": "1+2=", "completion": "3"})" << "\n";
  // A run directory without records, and one whose record file was cut short.
  fs::create_directories(*root_ / "run_empty");
  fs::create_directories(*root_ / "run_cut" / "mismatches");
  std::ofstream(*root_ / "run_cut" / "mismatches" / "step-000003.jsonl")
      << R"({"step": 3, "rollout": 0, "weight_version": 3, "weights_dir": "w", "prompt_tok)";

  const std::vector<Case> cases = {
      {{"--model", Model(), "--tokens", "1,2,3", "--a", "colour=red"}, "unknown path setting 'colour'"},
      {{"--model", Model(), "--tokens", "1,2,900"}, "token id 900"},
      {{"--model", Model(), "--tokens", "1,x,3"}, "--tokens: 'x' is not an integer"},
      {{"--model", small.string(), "--prompts", prompts.string()}, "do not belong together"},
      {{(*root_ / "run_empty").string()}, "no mismatch records"},
      {{(*root_ / "run_cut").string()}, "step-000003.jsonl:1"},
      {{"--model", Model(), "--tokens", "7"}, "at least 2"},
      {{"--model", Model()}, "exactly one of"},
      {{"--model", Model(), "--tokens", "1,2,3", "--colour", "red"}, "not expected: --colour"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("--json");
    args.push_back(json.string());
    const auto run = Diagnose(args);
    EXPECT_EQ(run.exit_code, 2) << c.message << "\n" << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << run.output;
    EXPECT_FALSE(fs::exists(json)) << c.message;
  }
}

TEST_F(DiagnoseCliTest, BehaviourFileIsComparedWithTheTrainerPath) {
  // Log-probs "from another engine": the generator's own (identical), then one nudged. Three
  // sequences, so that --a pack=2 runs them in two groups.
  const std::vector<std::string> lists = {Tokens(12, 4), Tokens(9, 5), Tokens(14, 6)};
  const fs::path same = *root_ / "same.json";
  ASSERT_EQ(Diagnose({"--model", Model(), "--tokens", lists[0], "--tokens", lists[1], "--tokens",
                      lists[2], "--prompt-length", "6", "--json", same.string()})
                .exit_code,
            0);
  const nlohmann::json report = nlohmann::json::parse(ReadFile(same));
  std::vector<std::vector<float>> logprobs;
  for (const nlohmann::json& sequence : report["sequences"]) {
    logprobs.push_back(sequence["logprobs_b"].get<std::vector<float>>());
  }
  ASSERT_EQ(logprobs.size(), 3u);
  const fs::path file = *root_ / "behaviour.jsonl";
  const auto write = [&] {
    std::ofstream out(file);
    for (size_t s = 0; s < lists.size(); ++s) {
      std::vector<int64_t> tokens;
      std::stringstream list(lists[s]);
      for (std::string t; std::getline(list, t, ',');) tokens.push_back(std::stoll(t));
      nlohmann::json line = {
          {"prompt_tokens", std::vector<int64_t>(tokens.begin(), tokens.begin() + 6)},
          {"completion_tokens", std::vector<int64_t>(tokens.begin() + 6, tokens.end())},
          {"logprobs", logprobs[s]}};
      out << line.dump() << "\n";
    }
  };
  write();
  const fs::path out = *root_ / "behaviour.json";
  auto run = Diagnose({"--model", Model(), "--behaviour", file.string(), "--a", "pack=2",
                       "--json", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  logprobs[2][2] += 0.25f;
  write();
  run = Diagnose({"--model", Model(), "--behaviour", file.string(), "--a", "pack=2", "--json",
                  out.string()});
  ASSERT_EQ(run.exit_code, 1) << run.output;
  const nlohmann::json nudged = nlohmann::json::parse(ReadFile(out));
  EXPECT_EQ(nudged["tokens_compared"].get<int64_t>(), 6 + 3 + 8);
  EXPECT_EQ(nudged["tokens_differing"].get<int64_t>(), 1);
  EXPECT_NEAR(nudged["max_abs_logprob_diff"].get<double>(), 0.25, 1e-6);
  EXPECT_EQ(nudged["sequences"][0]["tokens_differing"].get<int64_t>(), 0);
  EXPECT_EQ(nudged["sequences"][2]["tokens_differing"].get<int64_t>(), 1);
  EXPECT_TRUE(nudged["first_divergence"].is_null());
}

}  // namespace
}  // namespace lockstep
