// Engine tests on the tiny preset (2 layers). Batch-invariant mode makes the comparisons exact:
// generator log-probs vs the training forward, a request alone vs in a crowd, preempted vs not.
#include "generator/engine.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "gtest/gtest.h"
#include "model/checkpoint.h"

namespace lockstep::generator {
namespace {

using Outputs = std::map<std::pair<int64_t, int64_t>, SampleOutput>;  // (request, sample)

std::shared_ptr<Transformer> MakeModel(uint64_t seed,
                                       NumericMode mode = NumericMode::kBatchInvariant) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3, "tiny");
  config.num_hidden_layers = 2;
  ModelOptions options;
  options.numeric_mode = mode;
  return CreateRandomModel(config, seed, options);
}

EngineOptions SmallOptions(const Transformer& model, int64_t num_blocks, int64_t token_budget) {
  EngineOptions options;
  options.block_size = 4;
  options.kv_cache_bytes = num_blocks * BlockManager::BytesPerBlock(model.config(), 4);
  options.scheduler.max_num_batched_tokens = token_budget;
  options.scheduler.max_num_seqs = 64;
  return options;
}

std::unique_ptr<Engine> MakeEngine(std::shared_ptr<Transformer> model, const EngineOptions& o) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(std::move(model), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(*engine);
}

std::vector<int64_t> RandomPrompt(int64_t length, uint64_t seed, int64_t vocab = 512) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor ids = torch::randint(vocab, {length}, generator, torch::kInt64);
  return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
}

Request MakeRequest(int64_t prompt_len, uint64_t seed, int64_t n, double temperature,
                    int64_t max_tokens) {
  Request r;
  r.prompt = RandomPrompt(prompt_len, seed + 1000);
  r.n = n;
  r.seed = seed;
  r.params.temperature = temperature;
  r.params.max_tokens = max_tokens;
  return r;
}

void RunToCompletion(Engine& engine, Outputs* outputs, int64_t* max_batch = nullptr) {
  for (int step = 0; engine.HasUnfinished(); ++step) {
    ASSERT_LT(step, 100000) << "engine does not make progress";
    if (max_batch) *max_batch = std::max(*max_batch, engine.num_running());
    absl::StatusOr<std::vector<SampleOutput>> finished = engine.Step();
    ASSERT_TRUE(finished.ok()) << finished.status();
    for (SampleOutput& out : *finished) {
      auto key = std::make_pair(out.request_id, out.sample_index);
      outputs->emplace(key, std::move(out));
    }
  }
  EXPECT_EQ(engine.block_manager().num_free_blocks(), engine.block_manager().num_blocks());
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Trainer side: one packed training forward over prompt + completion of every sample that used
// `temperature`; the log-prob of each completion token, per sample.
std::vector<std::vector<float>> TrainerLogProbs(Transformer& model,
                                                const std::vector<const SampleOutput*>& samples,
                                                double temperature) {
  std::vector<std::vector<int64_t>> sequences;
  std::vector<int64_t> targets;
  for (const SampleOutput* s : samples) {
    std::vector<int64_t> full = s->prompt;
    full.insert(full.end(), s->tokens.begin(), s->tokens.end());
    for (size_t t = 0; t < full.size(); ++t)
      targets.push_back(t + 1 < full.size() ? full[t + 1] : 0);
    sequences.push_back(std::move(full));
  }
  PackedBatch batch = *PackSequences(sequences);
  absl::StatusOr<torch::Tensor> hidden = model.Hidden(batch, TrainingAttention{});
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  torch::Tensor logprobs =
      model.TargetLogProbs(*hidden, torch::tensor(targets, torch::kInt64), temperature).detach();
  std::vector<std::vector<float>> per_sample;
  for (size_t i = 0; i < samples.size(); ++i) {
    const int64_t begin = batch.cu_seqlens[i] + static_cast<int64_t>(samples[i]->prompt.size()) - 1;
    const int64_t count = static_cast<int64_t>(samples[i]->tokens.size());
    torch::Tensor rows = logprobs.slice(0, begin, begin + count).contiguous();
    per_sample.emplace_back(rows.data_ptr<float>(), rows.data_ptr<float>() + count);
  }
  return per_sample;
}

TEST(EngineParityTest, ContinuousBatchingLogProbsMatchTrainingForwardBitForBit) {
  auto model = MakeModel(11);
  // Token budget 16: long prompts prefill in chunks next to other sequences' decode steps.
  auto engine = MakeEngine(model, SmallOptions(*model, 256, 16));
  const std::vector<int64_t> prompt_lengths = {5, 23, 40, 1, 17, 33, 9, 28};
  const std::vector<double> temperatures = {0.0, 1.0, 0.7, 1.3};
  std::map<int64_t, double> request_temperature;
  for (size_t i = 0; i < prompt_lengths.size(); ++i) {
    Request r = MakeRequest(prompt_lengths[i], i, /*n=*/1 + i % 3, temperatures[i % 4],
                            /*max_tokens=*/10 + 3 * i);
    if (i % 4 == 2) r.params.top_k = 20;
    if (i % 4 == 3) r.params.top_p = 0.9;
    absl::StatusOr<int64_t> id = engine->AddRequest(r);
    ASSERT_TRUE(id.ok()) << id.status();
    request_temperature[*id] = r.params.temperature;
  }
  Outputs outputs;
  int64_t max_batch = 0;
  RunToCompletion(*engine, &outputs, &max_batch);
  ASSERT_EQ(outputs.size(), 15u);  // sum of n
  EXPECT_GE(max_batch, 4);

  std::map<double, std::vector<const SampleOutput*>> by_temperature;
  for (const auto& [key, out] : outputs) {
    EXPECT_EQ(out.finish_reason, FinishReason::kMaxTokens);
    EXPECT_EQ(out.tokens.size(), out.logprobs.size());
    by_temperature[request_temperature[key.first]].push_back(&out);
  }
  int64_t compared = 0;
  for (const auto& [temperature, samples] : by_temperature) {
    const auto trainer = TrainerLogProbs(*model, samples, temperature > 0 ? temperature : 1.0);
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_TRUE(BitEqual(samples[i]->logprobs, trainer[i]))
          << "request " << samples[i]->request_id << " sample " << samples[i]->sample_index;
      compared += static_cast<int64_t>(trainer[i].size());
    }
  }
  EXPECT_GT(compared, 200);
}

TEST(EngineParityTest, FastModeLogProbsAreCloseToTrainingForward) {
  auto model = MakeModel(11, NumericMode::kFast);
  auto engine = MakeEngine(model, SmallOptions(*model, 256, 16));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(engine->AddRequest(MakeRequest(7 + 9 * i, i, 2, 0.9, 12)).ok());
  }
  Outputs outputs;
  RunToCompletion(*engine, &outputs);
  std::vector<const SampleOutput*> samples;
  for (const auto& [key, out] : outputs) samples.push_back(&out);
  const auto trainer = TrainerLogProbs(*model, samples, 0.9);
  for (size_t i = 0; i < samples.size(); ++i) {
    ASSERT_EQ(samples[i]->logprobs.size(), trainer[i].size());
    for (size_t t = 0; t < trainer[i].size(); ++t) {
      EXPECT_NEAR(samples[i]->logprobs[t], trainer[i][t], 1e-4);
    }
  }
}

TEST(EngineTest, GreedySamplesOfOnePromptShareBlocksAndAgree) {
  auto model = MakeModel(12);
  auto engine = MakeEngine(model, SmallOptions(*model, 64, 64));
  Request r = MakeRequest(/*prompt_len=*/10, 1, /*n=*/4, /*temperature=*/0.0, 12);
  ASSERT_TRUE(engine->AddRequest(r).ok());
  // After the prefill step: the prompt's 3 blocks are shared by 4 samples.
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->num_running(), 4);
  EXPECT_EQ(engine->block_manager().num_free_blocks(), 64 - 3);
  Outputs outputs;
  RunToCompletion(*engine, &outputs);
  ASSERT_EQ(outputs.size(), 4u);
  for (const auto& [key, out] : outputs) {
    EXPECT_EQ(out.tokens, outputs.begin()->second.tokens);
    EXPECT_TRUE(BitEqual(out.logprobs, outputs.begin()->second.logprobs));
  }
}

TEST(EngineTest, SameSeedSameTokensAloneOrWithThirtyOneOthers) {
  auto model = MakeModel(13);
  Request probe = MakeRequest(13, 42, /*n=*/2, /*temperature=*/1.0, 16);
  probe.params.top_p = 0.95;

  auto alone = MakeEngine(model, SmallOptions(*model, 512, 32));
  ASSERT_TRUE(alone->AddRequest(probe).ok());
  Outputs alone_out;
  RunToCompletion(*alone, &alone_out);

  auto crowd = MakeEngine(model, SmallOptions(*model, 512, 32));
  int64_t probe_id = -1;
  for (int i = 0; i < 32; ++i) {
    if (i == 17) {
      probe_id = *crowd->AddRequest(probe);
      continue;
    }
    ASSERT_TRUE(crowd->AddRequest(MakeRequest(3 + (i * 7) % 30, 100 + i, 1, 0.9, 8 + i % 9)).ok());
  }
  Outputs crowd_out;
  int64_t max_batch = 0;
  RunToCompletion(*crowd, &crowd_out, &max_batch);
  EXPECT_GE(max_batch, 8);
  for (int64_t sample = 0; sample < 2; ++sample) {
    const SampleOutput& a = alone_out.at({0, sample});
    const SampleOutput& b = crowd_out.at({probe_id, sample});
    EXPECT_EQ(a.tokens, b.tokens) << "sample " << sample;
    EXPECT_TRUE(BitEqual(a.logprobs, b.logprobs)) << "sample " << sample;
  }
  EXPECT_NE(alone_out.at({0, 0}).tokens, alone_out.at({0, 1}).tokens);
}

TEST(EngineTest, PreemptionByRecomputeGivesIdenticalOutput) {
  auto model = MakeModel(14);
  auto add_all = [](Engine& engine) {
    for (int i = 0; i < 6; ++i) {
      Request r = MakeRequest(14 + 3 * i, 200 + i, /*n=*/2, /*temperature=*/1.0, 24);
      ASSERT_TRUE(engine.AddRequest(r).ok());
    }
  };
  auto roomy = MakeEngine(model, SmallOptions(*model, 1024, 64));
  add_all(*roomy);
  Outputs reference;
  RunToCompletion(*roomy, &reference);

  // 17 blocks of 4 slots: one sample (up to 29 + 24 tokens) needs up to 14 blocks (+1 CoW).
  auto tight = MakeEngine(model, SmallOptions(*model, 17, 64));
  add_all(*tight);
  Outputs constrained;
  RunToCompletion(*tight, &constrained);

  ASSERT_EQ(reference.size(), constrained.size());
  int64_t preemptions = 0;
  for (const auto& [key, out] : reference) {
    const SampleOutput& other = constrained.at(key);
    preemptions += other.num_preemptions;
    EXPECT_EQ(out.tokens, other.tokens);
    EXPECT_TRUE(BitEqual(out.logprobs, other.logprobs));
  }
  EXPECT_GT(preemptions, 0);
}

TEST(EngineTest, StopsOnEosStopTokenAndMaxTokens) {
  auto model = MakeModel(15);
  Request base = MakeRequest(8, 3, 1, /*temperature=*/0.0, 20);
  auto run_one = [&](const Request& r) {
    auto engine = MakeEngine(model, SmallOptions(*model, 64, 64));
    EXPECT_TRUE(engine->AddRequest(r).ok());
    Outputs out;
    RunToCompletion(*engine, &out);
    return out.at({0, 0});
  };
  const SampleOutput full = run_one(base);
  ASSERT_EQ(full.tokens.size(), 20u);
  EXPECT_EQ(full.finish_reason, FinishReason::kMaxTokens);
  auto first_index = [&](int64_t token) {
    return std::find(full.tokens.begin(), full.tokens.end(), token) - full.tokens.begin();
  };

  Request eos = base;
  eos.params.eos_token_id = full.tokens[5];
  SampleOutput eos_out = run_one(eos);
  EXPECT_EQ(eos_out.finish_reason, FinishReason::kEos);
  EXPECT_EQ(static_cast<int64_t>(eos_out.tokens.size()), first_index(full.tokens[5]) + 1);
  EXPECT_EQ(eos_out.tokens.back(), full.tokens[5]);

  Request stop = base;
  stop.params.stop_token_ids = {999999, full.tokens[3]};
  SampleOutput stop_out = run_one(stop);
  EXPECT_EQ(stop_out.finish_reason, FinishReason::kStopToken);
  EXPECT_EQ(static_cast<int64_t>(stop_out.tokens.size()), first_index(full.tokens[3]) + 1);

  Request shorter = base;
  shorter.params.max_tokens = 1;
  SampleOutput short_out = run_one(shorter);
  EXPECT_EQ(short_out.finish_reason, FinishReason::kMaxTokens);
  ASSERT_EQ(short_out.tokens.size(), 1u);
  EXPECT_EQ(short_out.tokens[0], full.tokens[0]);
}

TEST(EngineTest, AbortReturnsAbortedSamplesAndFreesBlocks) {
  auto model = MakeModel(16);
  auto engine = MakeEngine(model, SmallOptions(*model, 128, 16));
  const int64_t keep = *engine->AddRequest(MakeRequest(10, 1, 2, 1.0, 12));
  const int64_t drop = *engine->AddRequest(MakeRequest(30, 2, 3, 1.0, 12));
  const int64_t drop_waiting = *engine->AddRequest(MakeRequest(30, 3, 2, 1.0, 12));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(engine->Step().ok());
  EXPECT_TRUE(engine->Abort(drop));          // mid-prefill, forks still pending
  EXPECT_TRUE(engine->Abort(drop_waiting));  // not admitted yet
  EXPECT_FALSE(engine->Abort(drop));
  EXPECT_FALSE(engine->Abort(12345));
  Outputs outputs;
  RunToCompletion(*engine, &outputs);
  ASSERT_EQ(outputs.size(), 7u);
  for (int64_t s = 0; s < 3; ++s)
    EXPECT_EQ(outputs.at({drop, s}).finish_reason, FinishReason::kAborted);
  for (int64_t s = 0; s < 2; ++s) {
    EXPECT_EQ(outputs.at({drop_waiting, s}).finish_reason, FinishReason::kAborted);
    EXPECT_EQ(outputs.at({keep, s}).finish_reason, FinishReason::kMaxTokens);
    EXPECT_EQ(outputs.at({keep, s}).tokens.size(), 12u);
  }
}

TEST(EngineTest, HotSwapRecordsVersionsAndMatchesFreshEngine) {
  auto model = MakeModel(17);
  TensorMap new_weights;
  for (const auto& [name, tensor] : StateDict(*MakeModel(18))) new_weights[name] = tensor.clone();

  Request before = MakeRequest(9, 5, 1, 1.0, 20);
  Request after = MakeRequest(12, 6, 2, 0.8, 10);

  auto engine = MakeEngine(model, SmallOptions(*model, 128, 64));
  ASSERT_TRUE(engine->AddRequest(before).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(engine->Step().ok());
  TensorMap missing = new_weights;
  missing.erase("model.norm.weight");
  EXPECT_EQ(engine->InstallWeights(missing, 8).code(), absl::StatusCode::kInvalidArgument);
  TensorMap misshaped = new_weights;
  misshaped["model.norm.weight"] = torch::ones({3});
  EXPECT_EQ(engine->InstallWeights(misshaped, 8).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(engine->InstallWeights(new_weights, /*version=*/7).ok());
  EXPECT_EQ(engine->weight_version(), 0);  // staged until the next step
  const int64_t after_id = *engine->AddRequest(after);
  Outputs outputs;
  RunToCompletion(*engine, &outputs);
  EXPECT_EQ(engine->weight_version(), 7);

  const SampleOutput& swapped = outputs.at({0, 0});
  ASSERT_EQ(swapped.weight_versions.size(), 20u);
  // 6 steps under version 0: one prefill step (first token) + 5 decode steps.
  for (size_t t = 0; t < 20; ++t) EXPECT_EQ(swapped.weight_versions[t], t < 6 ? 0 : 7) << t;

  // Tokens before the swap equal a run under the old weights only.
  auto old_engine = MakeEngine(MakeModel(17), SmallOptions(*model, 128, 64));
  ASSERT_TRUE(old_engine->AddRequest(before).ok());
  Outputs old_outputs;
  RunToCompletion(*old_engine, &old_outputs);
  const SampleOutput& old_run = old_outputs.at({0, 0});
  EXPECT_TRUE(
      std::equal(swapped.tokens.begin(), swapped.tokens.begin() + 6, old_run.tokens.begin()));

  // A request added after the swap equals a fresh engine with the new weights.
  auto fresh = MakeEngine(MakeModel(18), SmallOptions(*model, 128, 64));
  ASSERT_TRUE(fresh->AddRequest(after).ok());
  Outputs fresh_outputs;
  RunToCompletion(*fresh, &fresh_outputs);
  for (int64_t s = 0; s < 2; ++s) {
    const SampleOutput& a = outputs.at({after_id, s});
    const SampleOutput& b = fresh_outputs.at({0, s});
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_TRUE(BitEqual(a.logprobs, b.logprobs));
    for (int64_t v : a.weight_versions) EXPECT_EQ(v, 7);
  }
}

TEST(EngineTest, RandomWorkloadWithAbortsSwapsAndTightPoolFinishesWithoutLeaks) {
  auto model = MakeModel(20, NumericMode::kFast);
  TensorMap other;
  for (const auto& [name, tensor] : StateDict(*MakeModel(21))) other[name] = tensor.clone();
  // 24 blocks of 4: forks, copy-on-write and preemption all happen often.
  auto engine = MakeEngine(model, SmallOptions(*model, 24, 12));
  std::mt19937_64 random(5);
  std::map<int64_t, int64_t> samples_per_request;
  std::set<int64_t> aborted;
  Outputs outputs;
  for (int step = 0; step < 400 && (step < 60 || engine->HasUnfinished()); ++step) {
    if (step < 60 && random() % 3 == 0) {
      Request r = MakeRequest(1 + random() % 30, random(), 1 + random() % 4, (random() % 4) * 0.5,
                              1 + random() % 30);
      if (random() % 2) r.params.top_k = 1 + random() % 50;
      absl::StatusOr<int64_t> id = engine->AddRequest(r);
      ASSERT_TRUE(id.ok()) << id.status();
      samples_per_request[*id] = r.n;
    }
    if (!samples_per_request.empty() && random() % 10 == 0) {
      const int64_t victim = random() % samples_per_request.size();
      if (engine->Abort(victim)) aborted.insert(victim);
    }
    if (step % 25 == 24) {
      ASSERT_TRUE(engine->InstallWeights(other, step).ok());
    }
    absl::StatusOr<std::vector<SampleOutput>> finished = engine->Step();
    ASSERT_TRUE(finished.ok()) << finished.status();
    for (SampleOutput& out : *finished) {
      const auto key = std::make_pair(out.request_id, out.sample_index);
      ASSERT_TRUE(outputs.emplace(key, std::move(out)).second) << "sample returned twice";
    }
  }
  EXPECT_FALSE(engine->HasUnfinished());
  EXPECT_EQ(engine->block_manager().num_free_blocks(), engine->block_manager().num_blocks());
  int64_t expected = 0, preemptions = 0;
  for (const auto& [id, n] : samples_per_request) expected += n;
  EXPECT_EQ(static_cast<int64_t>(outputs.size()), expected);
  for (const auto& [key, out] : outputs) {
    preemptions += out.num_preemptions;
    EXPECT_EQ(out.tokens.size(), out.logprobs.size());
    EXPECT_EQ(out.tokens.size(), out.weight_versions.size());
    EXPECT_TRUE(std::is_sorted(out.weight_versions.begin(), out.weight_versions.end()));
    if (out.finish_reason == FinishReason::kAborted) {
      EXPECT_TRUE(aborted.count(key.first));
    } else {
      EXPECT_EQ(out.finish_reason, FinishReason::kMaxTokens);
      for (float lp : out.logprobs) EXPECT_LE(lp, 0.0f);
    }
  }
  EXPECT_GT(preemptions, 0);
  EXPECT_FALSE(aborted.empty());
}

TEST(EngineTest, RejectsBadRequestsNamingTheField) {
  auto model = MakeModel(19);
  auto engine = MakeEngine(model, SmallOptions(*model, 64, 64));
  auto error = [&](Request r) {
    absl::StatusOr<int64_t> id = engine->AddRequest(r);
    EXPECT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(id.status().message());
  };
  Request good = MakeRequest(5, 1, 1, 1.0, 4);
  Request r = good;
  r.prompt.clear();
  EXPECT_NE(error(r).find("prompt"), std::string::npos);
  r = good;
  r.prompt[2] = 512;
  EXPECT_NE(error(r).find("token id"), std::string::npos);
  r = good;
  r.params.max_tokens = 0;
  EXPECT_NE(error(r).find("max_tokens"), std::string::npos);
  r = good;
  r.n = 65;
  EXPECT_NE(error(r).find("n must"), std::string::npos);
  r = good;
  r.params.max_tokens = 300;  // 64 blocks × 4 slots = 256 < 305
  EXPECT_NE(error(r).find("KV blocks"), std::string::npos);
  r = good;
  r.prompt.assign(2100, 1);
  EXPECT_NE(error(r).find("context"), std::string::npos);
  r = good;
  r.params.top_p = 0.0;
  EXPECT_NE(error(r).find("top_p"), std::string::npos);
  EXPECT_FALSE(engine->HasUnfinished());
}

}  // namespace
}  // namespace lockstep::generator
