// `lockstep forward`: one packed forward over the given sequences, printing each sequence's
// top-k next-token log-probs; optionally dumps all logits and continues with paged decoding.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_util.h"
#include "common/int_list.h"
#include "cli/commands.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "model/simple_decoder.h"

namespace lockstep::cli {
namespace {

struct ForwardFlags {
  ModelRunFlags run;
  std::vector<std::string> sequences;
  int top_k = 5;
  std::string dump;
  int64_t continue_tokens = 0;
  double temperature = 0.0;
  uint64_t seed = 0;
};

void PrintTopK(const torch::Tensor& logits, const PackedBatch& batch, int top_k) {
  torch::Tensor last = Transformer::LastTokenRows(logits, batch);
  torch::Tensor logprobs = torch::log_softmax(last, -1);
  const int64_t k = std::min<int64_t>(top_k, logprobs.size(1));
  auto [values, ids] = logprobs.topk(k, -1);
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    std::printf("sequence %lld (%lld tokens): next-token top-%lld:",
                static_cast<long long>(s), static_cast<long long>(batch.sequence_length(s)),
                static_cast<long long>(k));
    for (int64_t j = 0; j < k; ++j) {
      std::printf(" %lld:%.4f", static_cast<long long>(ids[s][j].item<int64_t>()),
                  values[s][j].item<float>());
    }
    std::printf("\n");
  }
}

absl::Status RunForward(const ForwardFlags& flags) {
  std::vector<std::vector<int64_t>> sequences;
  for (const std::string& text : flags.sequences) {
    absl::StatusOr<std::vector<int64_t>> ids = ParseIntList(text);
    if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("--tokens: ", ids.status().message()));
    sequences.push_back(*std::move(ids));
  }
  absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModelForRun(flags.run);
  if (!model.ok()) return model.status();
  absl::StatusOr<PackedBatch> batch = PackSequences(sequences);
  if (!batch.ok()) return batch.status();

  torch::NoGradGuard no_grad;
  absl::StatusOr<torch::Tensor> hidden = (*model)->Hidden(*batch, TrainingAttention{});
  if (!hidden.ok()) return hidden.status();
  torch::Tensor logits = (*model)->Logits(*hidden, ForwardKind::kTraining);
  PrintTopK(logits, *batch, flags.top_k);

  if (!flags.dump.empty()) {
    TensorMap dump = {{"logits", logits.contiguous()},
                      {"cu_seqlens", torch::tensor(batch->cu_seqlens, torch::kInt64)}};
    if (absl::Status s = WriteSafetensorsFile(flags.dump, dump); !s.ok()) return s;
    std::printf("wrote logits [%lld, %lld] to %s\n", static_cast<long long>(logits.size(0)),
                static_cast<long long>(logits.size(1)), flags.dump.c_str());
  }
  if (flags.continue_tokens > 0) {
    SimpleDecodeOptions options;
    options.max_new_tokens = flags.continue_tokens;
    options.temperature = flags.temperature;
    options.seed = flags.seed;
    absl::StatusOr<SimpleDecodeResult> decoded =
        DecodeGreedyOrSampled(**model, sequences, options);
    if (!decoded.ok()) return decoded.status();
    for (size_t s = 0; s < decoded->tokens.size(); ++s) {
      std::printf("sequence %zu continues (%s):", s,
                  flags.temperature > 0 ? "sampled" : "greedy");
      for (size_t j = 0; j < decoded->tokens[s].size(); ++j) {
        std::printf(" %lld(%.3f)", static_cast<long long>(decoded->tokens[s][j]),
                    decoded->logprobs[s][j]);
      }
      std::printf("\n");
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddForwardCommand(CLI::App& app) {
  auto flags = std::make_shared<ForwardFlags>();
  CLI::App* command = app.add_subcommand(
      "forward", "Run one packed forward and print next-token log-probs (sanity tool)");
  AddModelRunOptions(command, &flags->run);
  command->add_option("--tokens", flags->sequences,
                      "Token ids of one sequence, comma-separated; repeat for a packed batch")
      ->required();
  command->add_option("--top-k", flags->top_k, "How many next tokens to print")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--dump", flags->dump,
                      "Write all logits [tokens, vocab] and cu_seqlens to this safetensors file");
  command->add_option("--continue", flags->continue_tokens,
                      "Then decode this many tokens per sequence with the paged KV cache")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--temperature", flags->temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--seed", flags->seed, "Sampling seed")->capture_default_str();
  command->callback([flags] { ExitOnError(RunForward(*flags)); });
}

}  // namespace lockstep::cli
