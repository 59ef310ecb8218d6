#include "diagnose/execution_paths.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "generator/block_manager.h"
#include "generator/model_runner.h"
#include "generator/scheduler.h"
#include "generator/sequence.h"
#include "model/compute_threads.h"
#include "model/ops.h"
#include "trainer/token_logprobs.h"

namespace lockstep::diagnose {
namespace {

constexpr int64_t kBlockSize = 16;

// A sequence no one compares, of `length` tokens (prompt `prompt_length`), drawn from a stream
// seeded by `index`: the same fillers every run.
DiagnoseSequence Filler(int64_t index, int64_t length, int64_t prompt_length, int64_t vocab) {
  std::mt19937_64 rng(0x5eed0000 + index);
  DiagnoseSequence filler;
  filler.prompt_length = prompt_length;
  for (int64_t i = 0; i < length; ++i) {
    filler.tokens.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
  }
  return filler;
}

int64_t MaxLength(const std::vector<DiagnoseSequence>& sequences) {
  int64_t longest = 2;
  for (const auto& s : sequences) longest = std::max<int64_t>(longest, s.tokens.size());
  return longest;
}

absl::Status RunTrain(Transformer& model, const std::vector<DiagnoseSequence>& sequences,
                      const PathSettings& settings, double temperature, ForwardObserver* observer,
                      PathRun& run) {
  const int64_t count = static_cast<int64_t>(sequences.size());
  const int64_t longest = MaxLength(sequences);
  int64_t fillers = 0;
  for (int64_t begin = 0; begin < count; begin += settings.pack) {
    std::vector<trainer::ScoredSequence> scored;
    std::vector<RowKey> rows;
    for (int64_t j = 0; j < settings.pack; ++j) {
      const int64_t s = begin + j;
      const DiagnoseSequence sequence =
          s < count ? sequences[s]
                    : Filler(fillers++, longest, longest / 2, model.config().vocab_size);
      scored.push_back({sequence.tokens, sequence.num_completion()});
      const int64_t n = static_cast<int64_t>(sequence.tokens.size());
      for (int64_t p = 0; p < n; ++p) {
        rows.push_back(s < count && p + 1 < n ? RowKey{s, p} : RowKey{});
      }
    }
    run.capture->BeginForward(std::move(rows));
    torch::AutoGradMode grad(true);  // the trainer's loss forward runs with autograd on
    absl::StatusOr<trainer::TokenLogprobs> logprobs = trainer::ComputeTokenLogprobs(
        model, scored, temperature, /*with_entropy=*/false, observer);
    if (!logprobs.ok()) return logprobs.status();
    const torch::Tensor values = logprobs->logprobs.detach().contiguous();
    for (int64_t j = 0; j < settings.pack && begin + j < count; ++j) {
      const float* data = values.data_ptr<float>();
      run.logprobs[begin + j].assign(data + logprobs->cu_seqlens[j],
                                     data + logprobs->cu_seqlens[j + 1]);
    }
  }
  return absl::OkStatus();
}

absl::Status RunGenerate(Transformer& model, std::shared_ptr<Transformer> shared,
                         const std::vector<DiagnoseSequence>& sequences,
                         const PathSettings& settings, double temperature,
                         ForwardObserver* observer, PathRun& run) {
  using generator::Sequence;
  const int64_t count = static_cast<int64_t>(sequences.size());
  std::vector<DiagnoseSequence> all = sequences;
  const int64_t longest = MaxLength(sequences);
  for (int64_t f = 0; count + f < settings.batch; ++f) {
    all.push_back(Filler(f, longest, std::max<int64_t>(1, longest / 2), model.config().vocab_size));
  }
  int64_t num_blocks = 0;
  for (const auto& s : all) num_blocks += static_cast<int64_t>(s.tokens.size()) / kBlockSize + 2;
  generator::ModelRunner runner(std::move(shared), num_blocks, kBlockSize);
  generator::BlockManager blocks(num_blocks, kBlockSize);
  generator::SchedulerOptions options;
  options.max_num_batched_tokens = settings.chunk;
  options.max_num_seqs = settings.batch;
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  generator::Scheduler scheduler(options, &blocks);

  std::vector<std::unique_ptr<Sequence>> owned;
  std::map<const Sequence*, int64_t> index_of;
  for (int64_t s = 0; s < static_cast<int64_t>(all.size()); ++s) {
    generator::SamplingParams params;
    params.temperature = temperature;
    params.max_tokens = all[s].num_completion();
    std::vector<int64_t> prompt(all[s].tokens.begin(), all[s].tokens.begin() + all[s].prompt_length);
    owned.push_back(std::make_unique<Sequence>(s, 0, std::move(prompt), params, /*seed=*/0));
    index_of[owned.back().get()] = s;
    scheduler.Add(owned.back().get());
  }
  while (scheduler.HasUnfinished()) {
    generator::ScheduledStep step = scheduler.Schedule();
    if (step.empty()) return absl::InternalError("diagnose: the scheduler made an empty step");
    if (step.num_preempted > 0) {
      return absl::InternalError("diagnose: a sequence was preempted (block pool too small)");
    }
    std::vector<RowKey> rows;
    for (const generator::ScheduledSequence& scheduled : step.sequences) {
      const int64_t s = index_of.at(scheduled.seq);
      for (int64_t p = 0; p < scheduled.num_new_tokens; ++p) {
        rows.push_back(s < count ? RowKey{s, scheduled.seq->num_computed_tokens + p} : RowKey{});
      }
    }
    run.capture->BeginForward(std::move(rows));
    absl::StatusOr<torch::Tensor> logits = runner.Run(step, observer);
    if (!logits.ok()) return logits.status();
    scheduler.Commit(step);
    torch::Tensor log_probs;
    if (logits->size(0) > 0) {
      torch::NoGradGuard no_grad;
      log_probs = ops::LogSoftmax(*logits, temperature, model.options().numeric_mode).contiguous();
    }
    int64_t row = 0;
    for (const generator::ScheduledSequence& scheduled : step.sequences) {
      // After Commit: the sequences whose cache now holds every token sample this step.
      Sequence* seq = scheduled.seq;
      if (seq->num_computed_tokens != seq->num_tokens()) continue;
      const int64_t s = index_of.at(seq);
      const int64_t next = all[s].tokens[seq->num_tokens()];
      const float logprob = log_probs[row][next].item<float>();
      ++row;
      seq->AppendToken(next, logprob, /*weight_version=*/0);
      if (s < count) run.logprobs[s].push_back(logprob);
      if (seq->num_tokens() == static_cast<int64_t>(all[s].tokens.size())) {
        scheduler.Finish(seq, generator::FinishReason::kMaxTokens);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PathRun> RunPath(Transformer& model, const std::vector<DiagnoseSequence>& sequences,
                                const PathSettings& settings, double temperature,
                                OutputHook* perturb, bool observe) {
  if (model.options().numeric_mode != settings.mode ||
      model.options().compute_dtype != settings.dtype) {
    return absl::InternalError("diagnose: the model was not loaded with the path's settings");
  }
  PathRun run;
  std::vector<int64_t> lengths;
  for (const auto& s : sequences) lengths.push_back(static_cast<int64_t>(s.tokens.size()));
  run.capture = std::make_unique<OpCapture>(lengths, settings.mode, temperature, perturb);
  run.logprobs.resize(sequences.size());
  ForwardObserver* observer = observe ? run.capture.get() : nullptr;
  SetComputeThreads(settings.threads);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  try {
    if (settings.path == PathKind::kTrain) {
      status = RunTrain(model, sequences, settings, temperature, observer, run);
    } else {
      // The runner shares the model without owning it.
      std::shared_ptr<Transformer> borrowed(&model, [](Transformer*) {});
      status = RunGenerate(model, borrowed, sequences, settings, temperature, observer, run);
    }
  } catch (const c10::Error& e) {
    status = absl::InternalError(absl::StrCat("diagnose: ", e.what_without_backtrace()));
  }
  if (!status.ok()) return status;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace lockstep::diagnose
