#include "trainer/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"
#include "model/parity.h"
#include "trainer/caching_cpu_allocator.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/losses.h"
#include "trainer/lr_schedule.h"
#include "trainer/micro_batches.h"
#include "trainer/optimizer.h"
#include "trainer/token_logprobs.h"

namespace lockstep::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// Test hook (tests/diagnose): with LOCKSTEP_TEST_NUDGE_PARITY=1 in the trainer's environment,
// the first parity-compared log-prob of every step is moved by one ULP before the comparison
// (never in the loss), so that a batch-invariant run "mismatches" on purpose.
bool NudgeParityForTests() {
  static const bool nudge = [] {
    const char* value = std::getenv("LOCKSTEP_TEST_NUDGE_PARITY");
    return value != nullptr && std::string(value) == "1";
  }();
  return nudge;
}

std::vector<std::pair<std::string, torch::Tensor>> NamedParameters(const Transformer& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

// Running sums for the metrics of one step (this rank).
struct StepSums {
  double loss = 0, entropy = 0, ratio = 0, clipped = 0, kl = 0;
  double ratio_min = INFINITY, ratio_max = -INFINITY;
  int64_t tokens = 0;
};

}  // namespace

Trainer::Trainer(std::shared_ptr<Transformer> model, TrainerOptions options,
                 GradientReducer* reducer)
    : model_(std::move(model)),
      options_(std::move(options)),
      reducer_(reducer),
      generator_(at::make_generator<at::CPUGeneratorImpl>(options_.seed)) {}

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(std::shared_ptr<Transformer> model,
                                                         TrainerOptions options,
                                                         GradientReducer* reducer) {
  if (model == nullptr) return absl::InvalidArgumentError("trainer: model is null");
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (model->options().numeric_mode != options.mode) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer options: mode is ", NumericModeName(options.mode),
                     " but the model runs in ", NumericModeName(model->options().numeric_mode)));
  }
  for (const auto& item : model->named_parameters()) {
    if (item.value().scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("trainer: parameter '", item.key(), "' is not float32 (master weights)"));
    }
  }
  if (options.max_sequence_length == 0 ||
      options.max_sequence_length > model->config().max_position_embeddings) {
    options.max_sequence_length = model->config().max_position_embeddings;
  }
  // Each step's large temporaries reuse the previous step's memory instead of faulting in
  // fresh pages (caching_cpu_allocator.h).
  InstallCachingCpuAllocator();
  std::unique_ptr<Trainer> trainer(new Trainer(model, std::move(options), reducer));
  AdamWOptions adam;
  adam.beta1 = trainer->options_.beta1;
  adam.beta2 = trainer->options_.beta2;
  adam.eps = trainer->options_.eps;
  adam.weight_decay = trainer->options_.weight_decay;
  trainer->optimizer_ = std::make_unique<AdamW>(NamedParameters(*model), adam);
  if (trainer->options_.kl_coef > 0) {
    trainer->reference_ = std::make_shared<Transformer>(model->config(), model->options());
    TensorMap frozen;
    for (const auto& [name, tensor] : StateDict(*model)) frozen[name] = tensor.detach().clone();
    if (absl::Status s = LoadStateDict(*trainer->reference_, frozen, "KL reference"); !s.ok()) {
      return s;
    }
    for (auto& p : trainer->reference_->parameters()) p.set_requires_grad(false);
  }
  if (!trainer->options_.checkpoint_dir.empty()) trainer->StartCheckpointWriter();
  return trainer;
}

absl::Status Trainer::ValidateSequence(const char* what, size_t index,
                                       const std::vector<int64_t>& prompt,
                                       const std::vector<int64_t>& completion) const {
  auto fail = [what, index](const std::string& problem) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", index, ": ", problem));
  };
  if (prompt.empty()) return fail("empty prompt (the first completion token needs a prefix)");
  if (completion.empty()) return fail("empty completion");
  const int64_t length = static_cast<int64_t>(prompt.size() + completion.size());
  if (length > options_.max_sequence_length) {
    return fail(absl::StrCat("sequence of ", length, " tokens is over the maximum length ",
                             options_.max_sequence_length));
  }
  const int64_t vocab = model_->config().vocab_size;
  for (size_t j = 0; j < prompt.size(); ++j) {
    if (prompt[j] < 0 || prompt[j] >= vocab) {
      return fail(absl::StrCat("prompt token ", j, " has id ", prompt[j],
                               " outside the vocabulary [0, ", vocab, ")"));
    }
  }
  for (size_t j = 0; j < completion.size(); ++j) {
    if (completion[j] < 0 || completion[j] >= vocab) {
      return fail(absl::StrCat("completion token ", j, " has id ", completion[j],
                               " outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepMetrics> Trainer::TrainStep(const std::vector<Rollout>& batch,
                                               const std::string& mismatch_weights_dir) {
  const Clock::time_point start = Clock::now();
  if (batch.empty()) return absl::InvalidArgumentError("TrainStep: empty batch");
  // Validate everything before touching any state.
  const size_t routed_per_token = static_cast<size_t>(RoutedPerToken(model_->config()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const Rollout& r = batch[i];
    absl::Status valid = ValidateSequence("rollout", i, r.prompt_tokens, r.completion_tokens);
    if (!valid.ok()) return valid;
    const size_t n = r.completion_tokens.size();
    auto fail = [i](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat("rollout ", i, ": ", what));
    };
    if (r.behaviour_logprobs.size() != n) {
      return fail(absl::StrCat(r.behaviour_logprobs.size(), " behaviour log-probs for ", n,
                               " completion tokens"));
    }
    if (r.weight_versions.size() != n) {
      return fail(
          absl::StrCat(r.weight_versions.size(), " weight versions for ", n, " completion tokens"));
    }
    if (!r.loss_mask.empty() && r.loss_mask.size() != n) {
      return fail(
          absl::StrCat(r.loss_mask.size(), " loss-mask entries for ", n, " completion tokens"));
    }
    if (!r.routed_experts.empty() && r.routed_experts.size() != n * routed_per_token) {
      return fail(absl::StrCat(r.routed_experts.size(), " routed experts for ", n,
                               " completion tokens (the model routes ", routed_per_token,
                               " per token)"));
    }
    if (!std::isfinite(r.advantage)) {
      return fail(absl::StrCat("advantage is not finite (", r.advantage, ")"));
    }
    for (size_t j = 0; j < n; ++j) {
      if (r.weight_versions[j] > weight_version_ || r.weight_versions[j] < 0) {
        return fail(absl::StrCat("token ", j, " has weight version ", r.weight_versions[j],
                                 ", unknown to the trainer (at version ", weight_version_, ")"));
      }
    }
  }

  // Loss tokens: loss mask 1 and a finite behaviour log-prob.
  std::vector<std::vector<uint8_t>> masks(batch.size());
  int64_t local_tokens = 0, local_sequences = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Rollout& r = batch[i];
    masks[i].resize(r.completion_tokens.size());
    int64_t count = 0;
    for (size_t j = 0; j < masks[i].size(); ++j) {
      const bool in_loss =
          (r.loss_mask.empty() || r.loss_mask[j] != 0) && std::isfinite(r.behaviour_logprobs[j]);
      masks[i][j] = in_loss ? 1 : 0;
      count += in_loss;
    }
    local_tokens += count;
    local_sequences += count > 0;
  }
  double global_tokens = static_cast<double>(local_tokens);
  double global_sequences = static_cast<double>(local_sequences);
  if (reducer_ != nullptr) {
    absl::StatusOr<double> t = reducer_->AllReduceScalar(global_tokens);
    if (!t.ok()) return t.status();
    absl::StatusOr<double> s = reducer_->AllReduceScalar(global_sequences);
    if (!s.ok()) return s.status();
    global_tokens = *t;
    global_sequences = *s;
  }
  if (global_tokens <= 0) {
    return absl::InvalidArgumentError(
        "TrainStep: no loss tokens in the batch (every token masked or non-finite)");
  }

  std::vector<int64_t> lengths;
  for (const Rollout& r : batch) {
    lengths.push_back(static_cast<int64_t>(r.prompt_tokens.size() + r.completion_tokens.size()));
  }
  const std::vector<std::vector<int64_t>> micro_batches =
      PackMicroBatches(lengths, options_.micro_batch_tokens);
  const PolicyLossOptions loss_options = PolicyLossOptions::From(options_);
  double local_rows = 0;
  for (int64_t length : lengths) local_rows += static_cast<double>(length);
  double global_rows = local_rows;
  const bool moe_loss = options_.moe_aux_loss_coef > 0 || options_.moe_z_loss_coef > 0;
  if (reducer_ != nullptr && moe_loss && routed_per_token > 0) {
    absl::StatusOr<double> rows = reducer_->AllReduceScalar(local_rows);
    if (!rows.ok()) return rows.status();
    global_rows = *rows;
  }
  MoeStep moe(model_->config(), options_, local_rows, global_rows);

  StepMetrics metrics;
  StepSums sums;
  ParityStats& parity = metrics.parity;
  ParityAccumulator parity_tokens;
  bool nudged = false;
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();

  for (const std::vector<int64_t>& micro : micro_batches) {
    std::vector<ScoredSequence> sequences;
    std::vector<float> behaviour, advantages;
    std::vector<uint8_t> mask;
    int64_t rows = 0;
    for (int64_t i : micro) {
      const Rollout& r = batch[i];
      rows += lengths[i];
      ScoredSequence seq;
      seq.tokens = r.prompt_tokens;
      seq.tokens.insert(seq.tokens.end(), r.completion_tokens.begin(), r.completion_tokens.end());
      seq.num_completion = static_cast<int64_t>(r.completion_tokens.size());
      sequences.push_back(std::move(seq));
      behaviour.insert(behaviour.end(), r.behaviour_logprobs.begin(), r.behaviour_logprobs.end());
      advantages.insert(advantages.end(), r.completion_tokens.size(),
                        static_cast<float>(r.advantage));
      mask.insert(mask.end(), masks[i].begin(), masks[i].end());
    }
    absl::StatusOr<TokenLogprobs> forward = ComputeTokenLogprobs(
        *model_, sequences, options_.temperature, /*with_entropy=*/true, moe.observer());
    if (!forward.ok()) return forward.status();
    PolicyLossInput input;
    input.logprobs = forward->logprobs;
    input.behaviour_logprobs = torch::tensor(behaviour, torch::kFloat32);
    input.advantages = torch::tensor(advantages, torch::kFloat32);
    input.mask = torch::tensor(std::vector<int64_t>(mask.begin(), mask.end()), torch::kInt64)
                     .to(torch::kBool);
    input.cu_seqlens = forward->cu_seqlens;
    input.weights =
        AggregationWeights(options_.aggregation, input.mask, input.cu_seqlens, global_tokens,
                           global_sequences, options_.constant_normalizer);
    if (reference_ != nullptr) {
      torch::NoGradGuard no_grad;
      absl::StatusOr<TokenLogprobs> ref =
          ComputeTokenLogprobs(*reference_, sequences, options_.temperature, false);
      if (!ref.ok()) return ref.status();
      input.reference_logprobs = ref->logprobs;
    }
    PolicyLossResult result;
    try {
      result = PolicyLoss(input, loss_options);
      if (moe.sparse()) {
        (result.loss + moe.MicroBatchLoss(rows)).backward();
      } else {
        result.loss.backward();
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(
          absl::StrCat("TrainStep: backward failed: ", e.what_without_backtrace()));
    }
    ++metrics.micro_batches;

    // Metrics over loss tokens, and parity over policy-age-0 tokens, from this same forward.
    torch::Tensor logprobs = forward->logprobs.detach().contiguous();
    const float* trainer_lp = logprobs.data_ptr<float>();
    const float* entropy = forward->entropy.data_ptr<float>();
    torch::Tensor ratio = result.ratio.contiguous(), kl = result.kl.contiguous();
    torch::Tensor clipped = result.clipped.contiguous();
    const float* ratio_p = ratio.data_ptr<float>();
    const float* kl_p = kl.data_ptr<float>();
    const bool* clipped_p = clipped.data_ptr<bool>();
    sums.loss += result.loss.item<double>();
    int64_t k = 0, packed = 0;  // packed: the rollout's first row in this forward
    for (int64_t i : micro) {
      const Rollout& r = batch[i];
      const int64_t prompt = static_cast<int64_t>(r.prompt_tokens.size());
      for (size_t j = 0; j < r.completion_tokens.size(); ++j, ++k) {
        if (masks[i][j]) {
          ++sums.tokens;
          sums.entropy += entropy[k];
          sums.ratio += ratio_p[k];
          sums.ratio_min = std::min<double>(sums.ratio_min, ratio_p[k]);
          sums.ratio_max = std::max<double>(sums.ratio_max, ratio_p[k]);
          sums.clipped += clipped_p[k];
          sums.kl += kl_p[k];
        }
        const bool age_zero = r.weight_versions[j] == weight_version_;
        const bool in_mask = r.loss_mask.empty() || r.loss_mask[j] != 0;
        if (!age_zero || !in_mask) continue;
        float t = trainer_lp[k];
        if (!nudged && NudgeParityForTests()) t = std::nextafter(t, INFINITY);
        nudged = true;
        parity_tokens.Add(i, static_cast<int64_t>(j), t, r.behaviour_logprobs[j]);
        if (!r.routed_experts.empty()) {  // the row whose logits token j was sampled from
          const int64_t row = packed + prompt + static_cast<int64_t>(j) - 1;
          moe.CompareRouting(i, static_cast<int64_t>(j), row,
                             r.routed_experts.data() + j * routed_per_token);
        }
      }
      packed += lengths[i];
    }
  }
  const ParityReport compared = parity_tokens.Finish();
  parity.tokens_compared = compared.tokens_compared;
  parity.tokens_mismatched = compared.tokens_differing;
  parity.has_mismatch = compared.first_difference.has_value();
  if (parity.has_mismatch) {
    parity.mismatch_rollout = compared.first_difference->first;
    parity.mismatch_position = compared.first_difference->second;
    parity.mismatch_trainer_logprob = compared.first_trainer_logprob;
    parity.mismatch_generator_logprob = compared.first_generator_logprob;
  }
  parity.mismatched_rollouts = compared.differing_sequences;
  parity.max_abs_diff = compared.max_abs_diff;
  parity.mean_diff = compared.mean_diff;
  parity.k3 = compared.k3_kl;
  if (sums.tokens > 0) {
    const double n = static_cast<double>(sums.tokens);
    metrics.entropy = sums.entropy / n;
    metrics.ratio_mean = sums.ratio / n;
    metrics.ratio_min = sums.ratio_min;
    metrics.ratio_max = sums.ratio_max;
    metrics.clipped_fraction = sums.clipped / n;
    metrics.kl = sums.kl / n;
  }
  metrics.tokens = sums.tokens;
  metrics.sequences = static_cast<int64_t>(batch.size());
  metrics.loss = sums.loss;
  metrics.moe = moe.Finish();
  if (!mismatch_weights_dir.empty() && parity.tokens_mismatched > 0) {
    if (absl::Status s = SaveWeightsOnce(mismatch_weights_dir); !s.ok()) return s;
  }
  if (absl::Status s = ApplyGradients(metrics); !s.ok()) return s;
  metrics.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return metrics;
}

absl::Status Trainer::SaveWeightsOnce(const std::string& dir) const {
  std::error_code error;
  if (std::filesystem::exists(dir, error)) return absl::OkStatus();
  const std::filesystem::path temp = dir + ".tmp";
  std::filesystem::remove_all(temp, error);
  if (absl::Status s = SaveModel(*model_, temp); !s.ok()) return s;
  std::filesystem::rename(temp, dir, error);
  if (error && !std::filesystem::exists(dir)) {
    return absl::InternalError(absl::StrCat("saving mismatch weights to ", dir, ": ",
                                            error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepMetrics> Trainer::SftStep(const std::vector<SftExample>& batch) {
  const Clock::time_point start = Clock::now();
  if (batch.empty()) return absl::InvalidArgumentError("SftStep: empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::Status s =
        ValidateSequence("SFT example", i, batch[i].prompt_tokens, batch[i].completion_tokens);
    if (!s.ok()) return s;
  }
  int64_t local_tokens = 0;
  std::vector<int64_t> lengths;
  for (const SftExample& e : batch) {
    local_tokens += static_cast<int64_t>(e.completion_tokens.size());
    lengths.push_back(static_cast<int64_t>(e.prompt_tokens.size() + e.completion_tokens.size()));
  }
  double global_tokens = static_cast<double>(local_tokens);
  if (reducer_ != nullptr) {
    absl::StatusOr<double> t = reducer_->AllReduceScalar(global_tokens);
    if (!t.ok()) return t.status();
    global_tokens = *t;
    // Same collective sequence as TrainStep (second scalar: sequences), kept for symmetry.
    absl::StatusOr<double> s = reducer_->AllReduceScalar(static_cast<double>(batch.size()));
    if (!s.ok()) return s.status();
  }
  StepMetrics metrics;
  double loss_sum = 0, entropy_sum = 0;
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
  for (const std::vector<int64_t>& micro : PackMicroBatches(lengths, options_.micro_batch_tokens)) {
    std::vector<ScoredSequence> sequences;
    for (int64_t i : micro) {
      ScoredSequence seq;
      seq.tokens = batch[i].prompt_tokens;
      seq.tokens.insert(seq.tokens.end(), batch[i].completion_tokens.begin(),
                        batch[i].completion_tokens.end());
      seq.num_completion = static_cast<int64_t>(batch[i].completion_tokens.size());
      sequences.push_back(std::move(seq));
    }
    absl::StatusOr<TokenLogprobs> forward =
        ComputeTokenLogprobs(*model_, sequences, options_.temperature, /*with_entropy=*/true);
    if (!forward.ok()) return forward.status();
    try {
      // loss = -(1 / N) sum_t logp_t over all completion tokens of the step
      torch::Tensor weights = torch::full_like(forward->logprobs.detach(), 1.0 / global_tokens);
      torch::Tensor loss = SftLoss(forward->logprobs, weights);
      loss.backward();
      loss_sum += loss.item<double>();
    } catch (const c10::Error& e) {
      return absl::InternalError(
          absl::StrCat("SftStep: backward failed: ", e.what_without_backtrace()));
    }
    entropy_sum += forward->entropy.sum().item<double>();
    ++metrics.micro_batches;
  }
  metrics.loss = loss_sum;
  metrics.tokens = local_tokens;
  metrics.sequences = static_cast<int64_t>(batch.size());
  metrics.entropy = entropy_sum / static_cast<double>(local_tokens);
  if (absl::Status s = ApplyGradients(metrics, /*sft=*/true); !s.ok()) return s;
  metrics.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return metrics;
}

absl::Status Trainer::ApplyGradients(StepMetrics& metrics, bool sft) {
  std::vector<torch::Tensor> parameters = model_->parameters();
  try {
    std::vector<torch::Tensor> grads;
    for (auto& p : parameters) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad());
    }
    if (reducer_ != nullptr) {
      if (absl::Status s = reducer_->AllReduceSum(grads); !s.ok()) return s;
      absl::StatusOr<double> loss = reducer_->AllReduceScalar(metrics.loss);
      if (!loss.ok()) return loss.status();
      metrics.loss = *loss;
    }
    metrics.grad_norm = ClipGradNorm(parameters, options_.grad_clip);
    metrics.lr = sft && options_.sft_lr > 0 ? options_.sft_lr : LearningRateAt(options_, step_);
    optimizer_->Step(metrics.lr);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("trainer: optimizer step failed: ", e.what_without_backtrace()));
  }
  for (auto& p : parameters) p.mutable_grad() = torch::Tensor();
  ++step_;
  ++weight_version_;
  metrics.step = step_;
  metrics.weight_version = weight_version_;
  metrics.checkpoint_blocking_ms = std::exchange(unreported_blocking_ms_, std::nullopt);
  if (checkpoint_writer_ != nullptr) {
    if (std::optional<CheckpointWritten> written = checkpoint_writer_->TakeFinished()) {
      metrics.checkpoint_write_ms = written->write_ms;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> Trainer::ComputeLogprobs(
    const std::vector<SftExample>& sequences, double temperature) {
  if (!(temperature > 0) || !std::isfinite(temperature)) {
    return absl::InvalidArgumentError("ComputeLogprobs: temperature must be finite and > 0");
  }
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < sequences.size(); ++i) {
    absl::Status s =
        ValidateSequence("sequence", i, sequences[i].prompt_tokens, sequences[i].completion_tokens);
    if (!s.ok()) return s;
    lengths.push_back(static_cast<int64_t>(sequences[i].prompt_tokens.size() +
                                           sequences[i].completion_tokens.size()));
  }
  torch::NoGradGuard no_grad;
  std::vector<std::vector<float>> out(sequences.size());
  for (const std::vector<int64_t>& micro : PackMicroBatches(lengths, options_.micro_batch_tokens)) {
    std::vector<ScoredSequence> scored;
    for (int64_t i : micro) {
      ScoredSequence seq;
      seq.tokens = sequences[i].prompt_tokens;
      seq.tokens.insert(seq.tokens.end(), sequences[i].completion_tokens.begin(),
                        sequences[i].completion_tokens.end());
      seq.num_completion = static_cast<int64_t>(sequences[i].completion_tokens.size());
      scored.push_back(std::move(seq));
    }
    absl::StatusOr<TokenLogprobs> forward =
        ComputeTokenLogprobs(*model_, scored, temperature, /*with_entropy=*/false);
    if (!forward.ok()) return forward.status();
    torch::Tensor lp = forward->logprobs.contiguous();
    const float* p = lp.data_ptr<float>();
    for (size_t m = 0; m < micro.size(); ++m) {
      out[micro[m]].assign(p + forward->cu_seqlens[m], p + forward->cu_seqlens[m + 1]);
    }
  }
  return out;
}

TensorMap Trainer::Parameters() const { return StateDict(*model_); }

TensorMap Trainer::OptimizerState() const { return optimizer_->StateDict(); }

}  // namespace lockstep::trainer
