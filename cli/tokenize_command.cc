// `lockstep tokenize --tokenizer DIR "text"...`: prints the ids and pieces of each text, one
// token a line (id, the token's tokenizer.json string, and the bytes it stands for).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace lockstep::cli {
namespace {

struct TokenizeFlags {
  std::string tokenizer_dir;
  std::vector<std::string> texts;
  bool chat = false;
  bool ids_only = false;
};

// Shows control characters and invalid UTF-8 as JSON escapes, so every piece is one line.
std::string Quote(std::string_view bytes) {
  return nlohmann::json(std::string(bytes))
      .dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

absl::Status RunTokenize(const TokenizeFlags& flags) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(flags.tokenizer_dir);
  if (!tokenizer.ok()) return tokenizer.status();
  for (const std::string& input : flags.texts) {
    std::string text = input;
    if (flags.chat) {  // Render as one user turn with the model's chat template.
      absl::StatusOr<ChatTemplateFamily> family = ResolveChatTemplateFamily(flags.tokenizer_dir, "auto");
      if (!family.ok()) return family.status();
      const ChatMessage user{"user", input, std::nullopt};
      absl::StatusOr<std::string> rendered = RenderChat(*family, {&user, 1});
      if (!rendered.ok()) return rendered.status();
      text = *rendered;
    }
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text);
    if (!ids.ok()) return ids.status();
    if (flags.ids_only) {
      std::printf("%s\n", nlohmann::json(*ids).dump().c_str());
      continue;
    }
    std::printf("%s: %zu tokens\n", Quote(text).c_str(), ids->size());
    for (int32_t id : *ids) {
      absl::StatusOr<std::string_view> token = (*tokenizer)->IdToToken(id);
      absl::StatusOr<std::string_view> bytes = (*tokenizer)->TokenBytes(id);
      if (!token.ok()) return token.status();
      if (!bytes.ok()) return bytes.status();
      std::printf("%8d  %-24s %s%s\n", id, Quote(*token).c_str(), Quote(*bytes).c_str(),
                  (*tokenizer)->IsSpecial(id) ? "  (special)" : "");
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* command = app.add_subcommand("tokenize", "print the token ids and pieces of text");
  command->add_option("--tokenizer", flags->tokenizer_dir,
                      "model directory with tokenizer.json (or the file itself)")
      ->required();
  command->add_option("text", flags->texts, "text to tokenize")->required();
  command->add_flag("--chat", flags->chat,
                    "wrap each text as a user turn with the model's chat template first");
  command->add_flag("--ids-only", flags->ids_only, "print only a JSON list of ids per text");
  command->callback([flags] { ExitOnError(RunTokenize(*flags)); });
}

}  // namespace lockstep::cli
