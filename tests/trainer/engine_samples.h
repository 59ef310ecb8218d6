// Samples from the generator engine for trainer tests (test-only helper; needs lockstep_generator).
#ifndef LOCKSTEP_TESTS_TRAINER_ENGINE_SAMPLES_H_
#define LOCKSTEP_TESTS_TRAINER_ENGINE_SAMPLES_H_

#include <memory>
#include <vector>

#include "generator/engine.h"
#include "gtest/gtest.h"
#include "model/transformer.h"
#include "trainer/trainer.h"

namespace lockstep::trainer::testing {

// Samples `num_prompts` x n completions with the generator engine on its own copy of the model.
inline std::vector<generator::SampleOutput> Generate(std::shared_ptr<Transformer> model,
                                                     double temperature, int64_t num_prompts,
                                                     int64_t n) {
  generator::EngineOptions options;
  options.block_size = 4;
  options.kv_cache_bytes = 256 * generator::BlockManager::BytesPerBlock(model->config(), 4);
  options.scheduler.max_num_batched_tokens = 16;  // chunked prefill and mixed batches
  options.scheduler.max_num_seqs = 64;
  absl::StatusOr<std::unique_ptr<generator::Engine>> engine =
      generator::Engine::Create(std::move(model), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  for (int64_t p = 0; p < num_prompts; ++p) {
    generator::Request request;
    for (int64_t t = 0; t < 5 + 3 * p; ++t) request.prompt.push_back((37 * p + 11 * t + 5) % 512);
    request.n = n;
    request.seed = 100 + p;
    request.params.temperature = temperature;
    request.params.max_tokens = 6 + 2 * p;
    EXPECT_TRUE((*engine)->AddRequest(request).ok());
  }
  std::vector<generator::SampleOutput> samples;
  while ((*engine)->HasUnfinished()) {
    absl::StatusOr<std::vector<generator::SampleOutput>> finished = (*engine)->Step();
    EXPECT_TRUE(finished.ok()) << finished.status();
    if (!finished.ok()) break;
    samples.insert(samples.end(), finished->begin(), finished->end());
  }
  return samples;
}

// One on-policy rollout per sample (its log-probs, versions and routing as the engine reported
// them): advantage +1 for sample 0 of a request, -1 for the others, grouped by request.
inline std::vector<Rollout> RolloutsFrom(const std::vector<generator::SampleOutput>& samples) {
  std::vector<Rollout> rollouts;
  for (const generator::SampleOutput& s : samples) {
    Rollout r;
    r.prompt_tokens = s.prompt;
    r.completion_tokens = s.tokens;
    r.behaviour_logprobs = s.logprobs;
    r.weight_versions = s.weight_versions;
    r.routed_experts = s.routed_experts;
    r.advantage = s.sample_index == 0 ? 1.0 : -1.0;
    r.group_id = s.request_id;
    rollouts.push_back(std::move(r));
  }
  return rollouts;
}

// Completion tokens over all rollouts.
inline int64_t CompletionTokens(const std::vector<Rollout>& rollouts) {
  int64_t tokens = 0;
  for (const Rollout& r : rollouts) tokens += static_cast<int64_t>(r.completion_tokens.size());
  return tokens;
}

}  // namespace lockstep::trainer::testing

#endif  // LOCKSTEP_TESTS_TRAINER_ENGINE_SAMPLES_H_
