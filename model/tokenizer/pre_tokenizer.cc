#include "model/tokenizer/pre_tokenizer.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const nlohmann::json& config) {
  auto pre_tokenizer = std::make_unique<PreTokenizer>();
  if (config.is_null()) return pre_tokenizer;
  if (!config.is_object()) return absl::InvalidArgumentError("pre_tokenizer must be an object");
  if (config.value("type", "") == "Sequence") {
    for (const nlohmann::json& step : config.value("pretokenizers", nlohmann::json::array())) {
      if (absl::Status status = pre_tokenizer->AddStep(step); !status.ok()) return status;
    }
  } else if (absl::Status status = pre_tokenizer->AddStep(config); !status.ok()) {
    return status;
  }
  return pre_tokenizer;
}

absl::Status PreTokenizer::AddStep(const nlohmann::json& step) {
  const std::string type = step.value("type", "");
  if (byte_level_) {
    return absl::UnimplementedError(
        absl::StrCat("pre_tokenizer step '", type, "' after ByteLevel is not supported"));
  }
  if (type == "ByteLevel") {
    if (step.value("add_prefix_space", false)) {
      return absl::UnimplementedError("ByteLevel pre_tokenizer with add_prefix_space=true");
    }
    if (step.value("use_regex", true)) {
      absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter =
          RegexSplitter::Create(kGpt2SplitPattern);
      if (!splitter.ok()) return splitter.status();
      splitters_.push_back(*std::move(splitter));
    }
    byte_level_ = true;
    return absl::OkStatus();
  }
  if (type == "Split") {
    const nlohmann::json& pattern = step.value("pattern", nlohmann::json::object());
    if (!pattern.contains("Regex") || !pattern["Regex"].is_string()) {
      return absl::UnimplementedError("Split pre_tokenizer without a Regex pattern");
    }
    const std::string behavior = step.value("behavior", "");
    if (behavior != "Isolated" || step.value("invert", false)) {
      return absl::UnimplementedError(absl::StrCat("Split pre_tokenizer with behavior '", behavior,
                                                   "' or invert=true"));
    }
    absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter =
        RegexSplitter::Create(pattern["Regex"].get<std::string>());
    if (!splitter.ok()) return splitter.status();
    splitters_.push_back(*std::move(splitter));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("pre_tokenizer type '", type, "' is not supported"));
}

absl::Status PreTokenizer::Split(std::string_view text,
                                 std::vector<std::string_view>* pieces) const {
  if (splitters_.empty()) {
    pieces->push_back(text);
    return absl::OkStatus();
  }
  if (splitters_.size() == 1) return splitters_[0]->Split(text, pieces);
  // Each later splitter refines the pieces of the one before.
  std::vector<std::string_view> current = {text};
  std::vector<std::string_view> next;
  for (const std::unique_ptr<RegexSplitter>& splitter : splitters_) {
    next.clear();
    for (std::string_view piece : current) {
      if (absl::Status status = splitter->Split(piece, &next); !status.ok()) return status;
    }
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
  return absl::OkStatus();
}

}  // namespace lockstep
