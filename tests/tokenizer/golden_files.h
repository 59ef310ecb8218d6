// Locating the reference tokenizers and golden files for the tokenizer tests.
#ifndef LOCKSTEP_TESTS_TOKENIZER_GOLDEN_FILES_H_
#define LOCKSTEP_TESTS_TOKENIZER_GOLDEN_FILES_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::testing {

// $LOCKSTEP_TOKENIZERS_DIR, else .cache/tokenizers relative to the working directory (tests run
// from the repository root). scripts/fetch_tokenizers.sh fills it.
inline std::filesystem::path ReferenceTokenizerDir(const std::string& family) {
  const char* dir = std::getenv("LOCKSTEP_TOKENIZERS_DIR");
  return std::filesystem::path(dir != nullptr ? dir : ".cache/tokenizers") / family;
}

// In CI a missing reference tokenizer is a failure; on a developer machine, a skip that says how
// to fetch it.
inline bool RunningInCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

inline std::filesystem::path GoldenDir() { return "tests/golden/tokenizer"; }

// Reads a JSON Lines file; one parsed value per line.
inline std::vector<nlohmann::json> ReadJsonLines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

}  // namespace lockstep::testing

#endif  // LOCKSTEP_TESTS_TOKENIZER_GOLDEN_FILES_H_
