#include "generator/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "generator/sampler.h"

namespace lockstep::generator {

absl::Status EngineOptions::Validate() const {
  if (block_size <= 0) return absl::InvalidArgumentError("block_size must be > 0");
  if (kv_cache_bytes <= 0) return absl::InvalidArgumentError("kv_cache_bytes must be > 0");
  if (max_samples_per_request <= 0) {
    return absl::InvalidArgumentError("max_samples_per_request must be > 0");
  }
  return scheduler.Validate();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::shared_ptr<Transformer> model,
                                                       const EngineOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("engine needs a model");
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const int64_t num_blocks =
      BlockManager::NumBlocksForBudget(model->config(), options.block_size, options.kv_cache_bytes);
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_cache_bytes ", options.kv_cache_bytes, " holds no block of ",
                     BlockManager::BytesPerBlock(model->config(), options.block_size), " bytes"));
  }
  return std::unique_ptr<Engine>(new Engine(std::move(model), options, num_blocks));
}

Engine::Engine(std::shared_ptr<Transformer> model, const EngineOptions& options, int64_t num_blocks)
    : options_(options),
      max_context_(model->config().max_position_embeddings),
      mode_(model->options().numeric_mode),
      block_manager_(num_blocks, options.block_size),
      scheduler_(options.scheduler, &block_manager_),
      runner_(std::move(model), num_blocks, options.block_size),
      sparse_(!runner_.model().config().SparseLayers().empty()),
      weight_version_(options.initial_weight_version) {
  PublishWeightsSnapshot();
}

void Engine::PublishWeightsSnapshot() {
  TensorMap snapshot;
  for (const auto& item : runner_.model().named_parameters()) {
    snapshot.emplace(item.key(), item.value().detach());
  }
  std::lock_guard<std::mutex> lock(staged_mu_);
  snapshot_ = std::move(snapshot);
  snapshot_version_ = weight_version_;
}

std::pair<int64_t, TensorMap> Engine::WeightsSnapshot() const {
  std::lock_guard<std::mutex> lock(staged_mu_);
  return {snapshot_version_, snapshot_};
}

absl::StatusOr<int64_t> Engine::AddRequest(const Request& request) {
  const SamplingParams& params = request.params;
  const int64_t vocab = runner_.model().config().vocab_size;
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (int64_t token : request.prompt) {
    if (token < 0 || token >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", token, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (request.n < 1 || request.n > options_.max_samples_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be in [1, ", options_.max_samples_per_request, "]"));
  }
  if (params.max_tokens <= 0) return absl::InvalidArgumentError("max_tokens must be > 0");
  if (!(params.temperature >= 0.0)) return absl::InvalidArgumentError("temperature must be >= 0");
  if (params.top_k < 0) return absl::InvalidArgumentError("top_k must be >= 0");
  if (!(params.top_p > 0.0 && params.top_p <= 1.0)) {
    return absl::InvalidArgumentError("top_p must be in (0, 1]");
  }
  if (prompt_len + params.max_tokens > max_context_) {
    return absl::InvalidArgumentError(absl::StrCat("prompt (", prompt_len, ") + max_tokens (",
                                                   params.max_tokens, ") exceeds the context (",
                                                   max_context_, ")"));
  }
  // A lone sample must always fit the pool, copy-on-write included, or it could never finish.
  const int64_t blocks_for_one =
      (prompt_len + params.max_tokens + options_.block_size - 1) / options_.block_size + 1;
  if (blocks_for_one > block_manager_.num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("prompt + max_tokens needs ", blocks_for_one,
                                                   " KV blocks; the pool has ",
                                                   block_manager_.num_blocks()));
  }

  const int64_t id = next_request_id_++;
  RequestState& state = requests_[id];
  for (int64_t i = 0; i < request.n; ++i) {
    state.samples.push_back(
        std::make_unique<Sequence>(id, i, request.prompt, params, request.seed));
    if (i > 0) state.pending_forks.push_back(state.samples.back().get());
  }
  state.num_unfinished = request.n;
  scheduler_.Add(state.samples[0].get());
  return id;
}

absl::StatusOr<Engine::PreparedWeights> Engine::PrepareWeights(TensorMap state, int64_t version) {
  if (absl::Status s = runner_.CheckWeights(state); !s.ok()) return s;
  try {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : state) {
      if (tensor.scalar_type() != runner_.dtype()) tensor = tensor.to(runner_.dtype());
      if (!tensor.is_contiguous()) tensor = tensor.contiguous();
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("preparing weights: ", e.what_without_backtrace()));
  }
  return PreparedWeights{std::move(state), version};
}

absl::StatusOr<Transformer::ReleasedWeights> Engine::ApplyPreparedWeights(
    PreparedWeights prepared) {
  absl::StatusOr<Transformer::ReleasedWeights> released = runner_.AdoptWeights(prepared.state);
  if (!released.ok()) return released.status();
  weight_version_ = prepared.version;
  PublishWeightsSnapshot();
  return released;
}

absl::StatusOr<Transformer::ReleasedWeights> Engine::ApplyStagedWeights() {
  std::optional<PreparedWeights> staged;
  {
    std::lock_guard<std::mutex> lock(staged_mu_);
    staged.swap(staged_);
  }
  if (!staged.has_value()) return Transformer::ReleasedWeights();
  return ApplyPreparedWeights(*std::move(staged));
}

absl::Status Engine::InstallWeights(TensorMap state, int64_t version) {
  absl::StatusOr<PreparedWeights> prepared = PrepareWeights(std::move(state), version);
  if (!prepared.ok()) return prepared.status();
  std::lock_guard<std::mutex> lock(staged_mu_);
  staged_ = *std::move(prepared);
  return absl::OkStatus();
}

FinishReason Engine::StopReason(const Sequence& seq) const {
  const SamplingParams& params = seq.params();
  const int64_t last = seq.generated().back();
  if (params.eos_token_id.has_value() && last == *params.eos_token_id) return FinishReason::kEos;
  if (std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), last) !=
      params.stop_token_ids.end()) {
    return FinishReason::kStopToken;
  }
  if (seq.num_generated_tokens() >= params.max_tokens || seq.num_tokens() >= max_context_) {
    return FinishReason::kMaxTokens;
  }
  return FinishReason::kNone;
}

void Engine::FinishSample(Sequence* seq, FinishReason reason) {
  scheduler_.Finish(seq, reason);
  SampleOutput out;
  out.request_id = seq->request_id();
  out.sample_index = seq->sample_index();
  out.prompt = seq->prompt();
  out.tokens = seq->generated();
  out.logprobs = seq->logprobs();
  out.weight_versions = seq->weight_versions();
  out.routed_experts = seq->routed_experts();
  out.finish_reason = reason;
  out.num_preemptions = seq->num_preemptions;
  finished_.push_back(std::move(out));
  auto it = requests_.find(seq->request_id());
  if (--it->second.num_unfinished == 0) requests_.erase(it);  // frees the sequences
}

absl::StatusOr<std::vector<SampleOutput>> Engine::Step() {
  if (absl::StatusOr<Transformer::ReleasedWeights> released = ApplyStagedWeights();
      !released.ok()) {
    return released.status();
  }
  ScheduledStep step = scheduler_.Schedule();
  if (!step.empty()) {
    routing_.Clear();
    absl::StatusOr<torch::Tensor> logits = runner_.Run(step, sparse_ ? &routing_ : nullptr);
    if (!logits.ok()) return logits.status();
    scheduler_.Commit(step);
    std::vector<SamplingPick> picks;
    std::vector<int64_t> packed_rows;  // per logits row: its row in the packed batch
    int64_t row = 0, packed_end = 0;
    for (const ScheduledSequence& scheduled : step.sequences) {
      packed_end += scheduled.num_new_tokens;
      if (scheduled.seq->num_computed_tokens != scheduled.seq->num_tokens()) continue;
      packed_rows.push_back(packed_end - 1);
      Sequence* leader = scheduled.seq;
      picks.push_back({row, leader});
      RequestState& state = requests_.at(leader->request_id());
      if (leader->num_generated_tokens() == 0 && !state.pending_forks.empty()) {
        // The prompt is cached: the other samples share its blocks and this logits row.
        for (Sequence* child : state.pending_forks) {
          block_manager_.Fork(*leader, *child);
          scheduler_.AddRunning(child);
          picks.push_back({row, child});
        }
        state.pending_forks.clear();
      }
      ++row;
    }
    const std::vector<SampledToken> sampled = SampleTokens(*logits, picks, mode_);
    for (size_t i = 0; i < picks.size(); ++i) {
      Sequence* seq = picks[i].seq;
      seq->AppendToken(sampled[i].token, sampled[i].logprob, weight_version_);
      if (sparse_) seq->AppendRouting(routing_.RowExperts(packed_rows[picks[i].row]));
      const FinishReason reason = StopReason(*seq);
      if (reason != FinishReason::kNone) FinishSample(seq, reason);
    }
  }
  std::vector<SampleOutput> out;
  out.swap(finished_);
  return out;
}

bool Engine::Abort(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  std::vector<Sequence*> live;
  for (const auto& seq : it->second.samples) {
    if (seq->status != SequenceStatus::kFinished) live.push_back(seq.get());
  }
  // FinishSample erases the request after its last sample; `live` holds what to finish.
  // Pending forks hold no blocks and sit in no queue; finishing them is bookkeeping only.
  for (Sequence* seq : live) FinishSample(seq, FinishReason::kAborted);
  return true;
}

bool Engine::HasUnfinished() const { return !requests_.empty() || !finished_.empty(); }

}  // namespace lockstep::generator
