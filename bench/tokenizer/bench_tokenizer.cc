// Encode throughput (MB/s, one thread) of lockstep's tokenizer on a ~10 MB mixed corpus, next
// to the JavaScript port of Hugging Face tokenizers run on the same documents in the same run
// (through node). Prints a table; --json FILE writes the figures, `encode_ratio_vs_js` = ours/JS.
//   build/bench/tokenizer/bench_tokenizer --json bench_tokenizer.json
// Needs scripts/fetch_tokenizers.sh to have run; run from the repository root.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Documents of ~4 KB made of corpus strings picked by a fixed LCG, until `target_bytes`.
std::vector<std::string> MakeDocuments(const std::filesystem::path& corpus_path,
                                       size_t target_bytes) {
  std::vector<std::string> strings;
  std::ifstream in(corpus_path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) strings.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  }
  std::vector<std::string> documents;
  if (strings.empty()) return documents;
  uint64_t state = 12345;
  size_t total = 0;
  while (total < target_bytes) {
    std::string document;
    while (document.size() < 4096) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      document += strings[(state >> 33) % strings.size()];
      document += (state >> 20) % 3 == 0 ? "\n" : " ";
    }
    total += document.size();
    documents.push_back(std::move(document));
  }
  return documents;
}

struct EncodeRun {
  double seconds = 0;
  size_t num_tokens = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer encode throughput: lockstep vs the JavaScript reference"};
  std::string json_path;
  std::string tokenizer_dir = ".cache/tokenizers/qwen3";
  std::string corpus_path = "tests/golden/tokenizer/corpus.jsonl";
  std::string node = "node";
  std::string js_script = "scripts/bench_tokenizer_js.cjs";
  double corpus_mb = 10;
  int num_passes = 3;
  app.add_option("--json", json_path, "write results as JSON to this file");
  app.add_option("--tokenizer", tokenizer_dir, "directory with tokenizer.json");
  app.add_option("--corpus", corpus_path, "JSONL of {\"text\"} strings to build documents from");
  app.add_option("--mb", corpus_mb, "corpus size in MB (1e6 bytes)");
  app.add_option("--passes", num_passes, "timed passes (best is reported), each side");
  app.add_option("--node", node, "node executable ('' skips the JavaScript side)");
  app.add_option("--js-script", js_script, "the JavaScript benchmark script");
  CLI11_PARSE(app, argc, argv);

  const Clock::time_point load_start = Clock::now();
  absl::StatusOr<std::unique_ptr<lockstep::Tokenizer>> tokenizer =
      lockstep::Tokenizer::FromFile(tokenizer_dir);
  if (!tokenizer.ok()) {
    std::cerr << "bench_tokenizer: " << tokenizer.status() << " (run scripts/fetch_tokenizers.sh)\n";
    return 1;
  }
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
  const std::vector<std::string> documents =
      MakeDocuments(corpus_path, static_cast<size_t>(corpus_mb * 1e6));
  size_t num_bytes = 0;
  for (const std::string& document : documents) num_bytes += document.size();
  if (num_bytes == 0) {
    std::cerr << "bench_tokenizer: empty corpus " << corpus_path << "\n";
    return 1;
  }

  EncodeRun ours{1e30, 0};
  std::vector<std::vector<int32_t>> all_ids(documents.size());
  for (int pass = 0; pass < num_passes; ++pass) {
    size_t num_tokens = 0;
    const Clock::time_point start = Clock::now();
    for (size_t i = 0; i < documents.size(); ++i) {
      absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(documents[i]);
      if (!ids.ok()) {
        std::cerr << "bench_tokenizer: " << ids.status() << "\n";
        return 1;
      }
      num_tokens += ids->size();
      all_ids[i] = *std::move(ids);
    }
    ours.seconds = std::min(ours.seconds, std::chrono::duration<double>(Clock::now() - start).count());
    ours.num_tokens = num_tokens;
  }
  const Clock::time_point decode_start = Clock::now();
  size_t decoded_bytes = 0;
  for (const std::vector<int32_t>& ids : all_ids) decoded_bytes += (*tokenizer)->Decode(ids)->size();
  const double decode_seconds = std::chrono::duration<double>(Clock::now() - decode_start).count();

  // The JavaScript side reads the same documents from a temporary JSONL file.
  nlohmann::json js_result;
  if (!node.empty()) {
    const std::filesystem::path documents_path =
        std::filesystem::temp_directory_path() / "lockstep_bench_tokenizer_documents.jsonl";
    {
      std::ofstream out(documents_path);
      for (const std::string& document : documents) out << nlohmann::json(document).dump() << "\n";
    }
    const std::string command = node + " " + js_script + " " + tokenizer_dir + " " +
                                documents_path.string() + " " + std::to_string(num_passes);
    std::string output;
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char buffer[4096];
      while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
      if (pclose(pipe) != 0) output.clear();
    }
    std::filesystem::remove(documents_path);
    js_result = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
    if (js_result.is_discarded() || !js_result.contains("seconds")) {
      std::cerr << "bench_tokenizer: the JavaScript side failed: " << command << "\n";
      return 1;
    }
  }

  const double megabytes = num_bytes / 1e6;
  nlohmann::json result = {
      {"tokenizer", tokenizer_dir},
      {"corpus_bytes", num_bytes},
      {"num_documents", documents.size()},
      {"threads", 1},
      {"load_seconds", load_seconds},
      {"encode_mb_per_s", megabytes / ours.seconds},
      {"encode_tokens", ours.num_tokens},
      {"decode_mb_per_s", decoded_bytes / 1e6 / decode_seconds},
  };
  std::printf("%-28s %12s %12s\n", "tokenizer encode", "MB/s", "tokens");
  std::printf("%-28s %12.2f %12zu\n", "lockstep (C++)", megabytes / ours.seconds, ours.num_tokens);
  if (!js_result.is_null()) {
    const double js_mb_per_s = megabytes / js_result["seconds"].get<double>();
    const size_t js_tokens = js_result["num_tokens"].get<size_t>();
    result["js_encode_mb_per_s"] = js_mb_per_s;
    result["js_encode_tokens"] = js_tokens;
    result["tokens_match_js"] = js_tokens == ours.num_tokens;
    result["encode_ratio_vs_js"] = (megabytes / ours.seconds) / js_mb_per_s;
    std::printf("%-28s %12.2f %12zu\n", "JavaScript reference (node)", js_mb_per_s, js_tokens);
    std::printf("encode_ratio_vs_js = %.2f (target >= 3)\n", result["encode_ratio_vs_js"].get<double>());
  }
  std::printf("corpus %.1f MB in %zu documents; decode %.0f MB/s\n", megabytes, documents.size(),
              result["decode_mb_per_s"].get<double>());
  if (!json_path.empty()) std::ofstream(json_path) << result.dump(2) << "\n";
  return 0;
}
