#include "orchestrator/evaluation.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::orchestrator {

absl::StatusOr<EvalResult> Evaluate(const Dataset& eval, const Tokenizer& tokenizer,
                                    const PromptFormat& format,
                                    const std::vector<GeneratorClient*>& generators,
                                    rewards::RewardScorer& scorer,
                                    const v1::SamplingParams& sampling) {
  const absl::Time start = absl::Now();
  const size_t num = eval.num_examples();
  std::mutex mu;
  std::condition_variable cv;
  size_t num_done = 0;
  absl::Status error;
  std::vector<std::optional<v1::GenerateResponse>> outputs(num);
  std::vector<std::string> prompts(num);
  for (size_t i = 0; i < num; ++i) {
    const Example& example = eval.example(i);
    const std::string where = absl::StrCat(eval.source(), ":", example.line_number, ": prompt: ");
    absl::StatusOr<std::string> text = PromptText(example, format);
    if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(where, text.status().message()));
    prompts[i] = *std::move(text);
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(prompts[i]);
    if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ids.status().message()));
    v1::GenerateRequest request;
    for (int32_t id : *ids) request.add_prompt_token_ids(id);
    request.set_n(1);
    *request.mutable_sampling() = sampling;
    request.mutable_sampling()->set_temperature(0.0);
    generators[i % generators.size()]->GenerateAsync(
        request, absl::Minutes(10),
        [&, i](absl::StatusOr<std::vector<v1::GenerateResponse>> samples) {
          std::lock_guard<std::mutex> lock(mu);
          if (samples.ok()) {
            outputs[i] = std::move(samples->front());
          } else if (error.ok()) {
            error = samples.status();
          }
          ++num_done;
          cv.notify_all();
        });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return num_done == num; });
    if (!error.ok()) return error;
  }
  std::vector<rewards::RewardInput> items(num);
  for (size_t i = 0; i < num; ++i) {
    const Example& example = eval.example(i);
    items[i].prompt = prompts[i];
    items[i].completion_token_ids.assign(outputs[i]->token_ids().begin(),
                                         outputs[i]->token_ids().end());
    absl::StatusOr<std::string> text =
        tokenizer.Decode(items[i].completion_token_ids, /*skip_special_tokens=*/true);
    items[i].completion = text.ok() ? *text : "";
    items[i].reference = example.answer.value_or("");
    items[i].metadata = MetadataStrings(example);
  }
  std::vector<rewards::ItemOutcome> outcomes = scorer.Score(std::move(items));
  EvalResult result;
  result.num_prompts = static_cast<int64_t>(num);
  double reward_sum = 0;
  for (const rewards::ItemOutcome& outcome : outcomes) {
    if (!outcome.ok) {
      ++result.num_failed;
      continue;
    }
    reward_sum += outcome.reward;
    result.num_correct += outcome.reward >= 1.0 ? 1 : 0;
  }
  const int64_t num_scored = result.num_prompts - result.num_failed;
  result.accuracy = num > 0 ? static_cast<double>(result.num_correct) / num : 0.0;
  result.reward_mean = num_scored > 0 ? reward_sum / num_scored : 0.0;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace lockstep::orchestrator
