#include "orchestrator/rl_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "diagnose/mismatch_record.h"
#include "model/tokenizer/chat_template.h"
#include "orchestrator/train_rollout.h"
#include "orchestrator/valid_utf8.h"
#include "orchestrator/weight_sync_driver.h"

namespace lockstep::orchestrator {
namespace {

// SplitMix64: a prompt's sampling seed from the job seed and its number, so that a resumed run
// samples exactly what an uninterrupted one would.
uint64_t PromptSeed(uint64_t seed, int64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

MoeRecord ToRecord(const v1::MoeStats& moe) {
  MoeRecord record;
  record.aux_loss = moe.aux_loss();
  record.z_loss = moe.z_loss();
  record.load_imbalance_max = moe.load_imbalance_max();
  record.sparse_layers.assign(moe.sparse_layers().begin(), moe.sparse_layers().end());
  const int64_t experts = moe.num_experts();
  for (int64_t begin = 0; experts > 0 && begin < moe.expert_load_size(); begin += experts) {
    record.expert_load.emplace_back(moe.expert_load().begin() + begin,
                                    moe.expert_load().begin() + begin + experts);
  }
  record.routing_tokens_compared = moe.routing_tokens_compared();
  record.routing_tokens_disagreeing = moe.routing_tokens_disagreeing();
  if (moe.routing_tokens_disagreeing() > 0) {
    record.first_disagreement = RoutingDisagreement{moe.first_disagreement_rollout(),
                                                    moe.first_disagreement_position(),
                                                    moe.first_disagreement_layer()};
  }
  return record;
}


// One reward item per sample of a generated prompt: the completion decoded (for an episode, the
// whole transcript after the prompt, observations included).
std::vector<rewards::RewardInput> RewardItems(const PromptInFlight& prompt,
                                              const Tokenizer& tokenizer) {
  std::vector<rewards::RewardInput> items;
  for (const v1::GenerateResponse& sample : prompt.samples) {
    rewards::RewardInput item;
    item.prompt = prompt.prompt_text;
    item.completion_token_ids.assign(sample.token_ids().begin(), sample.token_ids().end());
    absl::StatusOr<std::string> text =
        tokenizer.Decode(item.completion_token_ids, /*skip_special_tokens=*/true);
    item.completion = text.ok() ? ValidUtf8(*text) : "";
    item.reference = prompt.example->answer.value_or("");
    item.metadata = MetadataStrings(*prompt.example);
    items.push_back(std::move(item));
  }
  return items;
}

// An episode's outcome plus the reward scorer's for its transcript: failed when either failed.
rewards::ItemOutcome AddScorerOutcome(rewards::ItemOutcome episode,
                                      const rewards::ItemOutcome& scored) {
  if (!episode.ok) return episode;
  if (!scored.ok) return scored;
  episode.reward += scored.reward;
  for (const auto& [key, value] : scored.sub_scores) episode.sub_scores[key] = value;
  return episode;
}

}  // namespace

RlLoop::RlLoop(RlLoopOptions options, RlServices services, const Dataset* dataset,
               DatasetIterator iterator, int64_t start_step)
    : options_(std::move(options)),
      services_(std::move(services)),
      dataset_(dataset),
      iterator_(std::move(iterator)),
      admission_(options_.max_staleness, options_.prompts_per_step),
      queue_(std::make_shared<RolloutQueue>(static_cast<int64_t>(services_.generators.size()))),
      step_(start_step),
      next_prompt_index_(start_step * options_.prompts_per_step) {
  if (services_.recovery != nullptr && services_.environment == nullptr) {
    queue_->KeepFailedCalls();
    tend_ = [this] { return TendGenerators(); };
  } else if (services_.recovery != nullptr) {
    // Multi-turn: a dead generator fails its episodes and the job (not recovered yet), but the
    // reward and environment servers are still restarted (TakeDeaths).
    tend_ = [this] {
      services_.recovery->TakeDeaths();
      return absl::OkStatus();
    };
  }
  if (options_.parity != "off" && options_.mismatch_records.max_records > 0) {
    mismatch_recorder_ = std::make_unique<MismatchRecorder>(options_.mismatch_records);
  }
}

RlLoop::~RlLoop() {
  // Generation calls still in flight (after an error or a stop) end within their deadline; their
  // callbacks use the scorer and tokenizer, which the caller destroys after the loop.
  if (!queue_->WaitForCallbacks(options_.generate_timeout)) {
    std::fprintf(stderr, "lockstep run: generation calls still running at shutdown\n");
  }
}

absl::Status RlLoop::Run(const StepCallback& on_step, const CheckpointFn& checkpoint,
                         const std::function<bool()>& stop) {
  while (step_ < options_.steps) {
    if (stop && stop()) return absl::CancelledError("stopped by a signal");
    absl::StatusOr<StepRecord> record = Step(stop);
    if (!record.ok()) return record.status();
    if (on_step) on_step(*record);
    if (checkpoint && options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0 &&
        step_ < options_.steps) {
      if (absl::Status s = checkpoint(step_, DataCursor()); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepRecord> RlLoop::Step(const std::function<bool()>& stop) {
  const absl::Time start = absl::Now();
  // Generator idle time is counted over this step only (not the time between steps), so that
  // idle_fraction_generator is a share of this step's total.
  for (size_t g = 0; g < services_.generators.size(); ++g) {
    queue_->TakeGeneratorIdle(static_cast<int64_t>(g));
  }
  if (trainer_version_ < 0) {
    absl::StatusOr<v1::TrainerStatusResponse> status = services_.trainer->GetStatus();
    if (!status.ok()) return status.status();
    trainer_version_ = status->weight_version();
  }
  AdmitPrompts();
  QueueWait wait;
  absl::StatusOr<std::vector<std::shared_ptr<PromptInFlight>>> batch =
      queue_->WaitForOldest(options_.prompts_per_step, stop, &wait, tend_);
  if (!batch.ok()) return batch.status();
  cursors_in_flight_.erase(cursors_in_flight_.begin(),
                           cursors_in_flight_.begin() + options_.prompts_per_step);

  StepRecord record;
  absl::StatusOr<v1::TrainStepRequest> request = BuildTrainBatch(*batch, trainer_version_, &record);
  if (!request.ok()) return request.status();
  if (mismatch_recorder_ != nullptr) {
    // The trainer saves the weights it scores with there, only if a token mismatches.
    request->set_mismatch_weights_dir(mismatch_recorder_->WeightsDirFor(trainer_version_));
  }

  const absl::Time train_start = absl::Now();
  absl::StatusOr<v1::TrainStepResponse> response =
      services_.trainer->TrainStep(*request, options_.train_timeout);
  if (!response.ok()) return response.status();
  const v1::StepMetrics& metrics = response->metrics();
  const absl::Duration train_time = absl::Now() - train_start;
  if (mismatch_recorder_ != nullptr && !request->mismatch_weights_dir().empty()) {
    // Before the strict check, which stops the job: the stop names these records.
    absl::Status s =
        mismatch_recorder_->Record(step_ + 1, trainer_version_, *request, metrics.parity());
    if (!s.ok()) return s;
  }
  if (absl::Status s = CheckParity(*request, metrics); !s.ok()) return s;

  const absl::Time sync_start = absl::Now();
  absl::StatusOr<SyncFigures> sync;
  if (services_.recovery != nullptr && services_.recovery->num_restarting() > 0) {
    // A generator still restarting joins the group now, and this sync is its first; then it
    // takes the prompts still waiting for a generator.
    sync = FinishRestarts({}, metrics.weight_version());
    if (sync.ok()) GiveWaitingToIdle({});
  } else {
    sync = SyncWeights(*services_.trainer, services_.generators, metrics.weight_version(),
                       options_.sync_timeout);
    if (!sync.ok()) sync = RecoverSync(sync.status(), metrics.weight_version());
  }
  if (!sync.ok()) return sync.status();
  const absl::Duration sync_time = absl::Now() - sync_start;
  trainer_version_ = metrics.weight_version();
  admission_.StepSynced();
  ++step_;
  AdmitPrompts();  // generation of the next prompts starts before the record is written

  double generator_idle_s = 0;
  for (size_t g = 0; g < services_.generators.size(); ++g) {
    generator_idle_s += Seconds(queue_->TakeGeneratorIdle(static_cast<int64_t>(g)));
  }
  const double total_s = Seconds(absl::Now() - start);
  const double busy_s = Seconds(wait.generate + wait.reward + train_time + sync_time);
  const v1::ParityStats& parity = metrics.parity();
  record.step = step_;
  record.weight_version = metrics.weight_version();
  record.loss = metrics.loss();
  record.grad_norm = metrics.grad_norm();
  record.lr = metrics.lr();
  record.entropy = metrics.entropy();
  record.ratio_mean = metrics.ratio_mean();
  record.clipped_fraction = metrics.clipped_fraction();
  record.train_tokens = metrics.tokens();
  record.train_tokens_per_s = metrics.tokens() / std::max(1e-9, Seconds(train_time));
  record.parity = ParityRecord{parity.tokens_compared(), parity.tokens_mismatched(),
                               parity.max_abs_diff(), parity.mean_diff(), parity.k3()};
  record.time = StepTimes{Seconds(wait.generate),
                          Seconds(wait.reward),
                          Seconds(train_time),
                          Seconds(sync_time),
                          std::max(0.0, total_s - busy_s),
                          total_s};
  // The trainer waits for rollouts (generate + reward) and for the sync; generators wait when
  // no call of theirs is in flight.
  record.idle_fraction_trainer = Seconds(wait.generate + wait.reward) / std::max(1e-9, total_s);
  record.idle_fraction_generator =
      generator_idle_s / std::max(1e-9, total_s * static_cast<double>(services_.generators.size()));
  record.sync_bytes = sync->bytes;
  record.swap_pause_ms = sync->max_swap_pause_ms;
  record.sync_trainer_s = sync->trainer_seconds;
  if (metrics.has_checkpoint_blocking_ms()) {
    record.checkpoint_blocking_ms = metrics.checkpoint_blocking_ms();
  }
  if (metrics.has_checkpoint_write_ms()) record.checkpoint_write_ms = metrics.checkpoint_write_ms();
  if (metrics.has_moe()) record.moe = ToRecord(metrics.moe());
  if (services_.recovery != nullptr) {
    std::vector<RestartRecord> restarts = services_.recovery->TakeRestartRecords();
    if (!restarts.empty()) record.restarts = std::move(restarts);
    std::vector<FirstSampleRecord> first_samples = TakeFirstSamples();
    if (!first_samples.empty()) record.first_samples = std::move(first_samples);
    record.prompts_resubmitted = std::exchange(step_resubmitted_, 0);
    record.generator_restarts = std::exchange(step_restarts_, 0);
  }
  if (services_.environment != nullptr) {
    // Episodes that ended since the last step (those of prompts still in flight included).
    const EnvironmentTotals now = services_.environment->totals();
    record.episodes = EpisodeCounts{now.episodes - episodes_before_.episodes,
                                    now.episodes_failed - episodes_before_.episodes_failed,
                                    now.episodes_truncated - episodes_before_.episodes_truncated,
                                    now.turns - episodes_before_.turns};
    episodes_before_ = now;
  }
  totals_.Add(record);
  return record;
}

void RlLoop::AdmitPrompts() {
  // Prompts beyond the job's last step would never train.
  const int64_t last_prompt = options_.steps * options_.prompts_per_step;
  while (admission_.CanAdmit() && next_prompt_index_ < last_prompt) {
    if (absl::Status s = SubmitPrompt(); !s.ok()) {
      queue_->Fail(s);
      return;
    }
  }
}

absl::Status RlLoop::SubmitPrompt() {
  cursors_in_flight_.push_back(iterator_.cursor());
  const Example& example = iterator_.Next();
  auto prompt = std::make_shared<PromptInFlight>();
  prompt->index = next_prompt_index_++;
  prompt->example = &example;
  absl::StatusOr<std::string> rendered = PromptText(example, options_.prompt_format);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(dataset_->source(), ":", example.line_number,
                                                   ": prompt: ", rendered.status().message()));
  }
  prompt->prompt_text = *std::move(rendered);
  absl::StatusOr<std::vector<int32_t>> ids = services_.tokenizer->Encode(prompt->prompt_text);
  if (!ids.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(dataset_->source(), ":", example.line_number,
                                                   ": prompt: ", ids.status().message()));
  }
  prompt->prompt_ids.assign(ids->begin(), ids->end());
  prompt->generator = next_generator_;
  next_generator_ = (next_generator_ + 1) % static_cast<int64_t>(services_.generators.size());
  prompt->submitted = absl::Now();
  if (services_.recovery != nullptr) {
    prompt->incarnation = services_.recovery->incarnation(prompt->generator);
  }
  admission_.Admit();
  ++ledger_.issued;
  queue_->Push(prompt);

  if (services_.environment != nullptr) {
    SubmitEpisodes(prompt);
    return absl::OkStatus();
  }
  StartGeneration(prompt);
  return absl::OkStatus();
}

void RlLoop::StartGeneration(const std::shared_ptr<PromptInFlight>& prompt) {
  // The same request every time the prompt is generated: its seed follows its number, so a
  // regenerated prompt (its generator died) samples the same tokens in batch-invariant mode.
  v1::GenerateRequest request;
  for (int64_t id : prompt->prompt_ids) request.add_prompt_token_ids(id);
  request.set_n(options_.samples_per_prompt);
  *request.mutable_sampling() = options_.sampling;
  request.mutable_sampling()->set_seed(PromptSeed(options_.seed, prompt->index));
  std::shared_ptr<RolloutQueue> queue = queue_;
  rewards::RewardScorer* scorer = services_.scorer;
  const Tokenizer* tokenizer = services_.tokenizer;
  const int64_t index = prompt->index;
  services_.generators[prompt->generator]->GenerateAsync(
      request, options_.generate_timeout,
      [queue, scorer, tokenizer, index](absl::StatusOr<std::vector<v1::GenerateResponse>> samples) {
        std::shared_ptr<PromptInFlight> prompt = queue->MarkGenerated(index, std::move(samples));
        if (prompt == nullptr || prompt->samples.empty()) {
          queue->CallbackDone();
          return;
        }
        // Score in the background: rewards never block generation or the loop.
        scorer->ScoreAsync(RewardItems(*prompt, *tokenizer),
                           [queue, index](std::vector<rewards::ItemOutcome> o) {
                             queue->MarkScored(index, std::move(o));
                           });
        queue->CallbackDone();
      });
}

void RlLoop::SubmitEpisodes(const std::shared_ptr<PromptInFlight>& prompt) {
  EpisodeRequest episodes;
  episodes.index = prompt->index;
  episodes.prompt_text = prompt->prompt_text;
  episodes.prompt_ids = prompt->prompt_ids;
  episodes.reference = prompt->example->answer.value_or("");
  episodes.metadata = MetadataStrings(*prompt->example);
  episodes.seed = PromptSeed(options_.seed, prompt->index);
  episodes.generator = services_.generators[prompt->generator];
  std::shared_ptr<RolloutQueue> queue = queue_;
  rewards::RewardScorer* scorer = services_.scorer;
  const Tokenizer* tokenizer = services_.tokenizer;
  const int64_t index = prompt->index;
  // Runs on an episode worker once the prompt's episodes have ended.
  services_.environment->RunAsync(std::move(episodes), [queue, scorer, tokenizer,
                                                        index](absl::StatusOr<EpisodeBatch> batch) {
    if (!batch.ok()) {
      queue->MarkGenerated(index, batch.status());
      queue->CallbackDone();
      return;
    }
    std::vector<rewards::ItemOutcome> outcomes = std::move(batch->outcomes);
    std::shared_ptr<PromptInFlight> prompt = queue->MarkGenerated(index, std::move(batch->samples));
    if (prompt == nullptr) {
      queue->CallbackDone();
      return;
    }
    if (scorer == nullptr) {
      queue->MarkScored(index, std::move(outcomes));
    } else {
      scorer->ScoreAsync(RewardItems(*prompt, *tokenizer),
                         [queue, index, outcomes = std::move(outcomes)](
                             std::vector<rewards::ItemOutcome> scored) mutable {
                           for (size_t i = 0; i < outcomes.size() && i < scored.size(); ++i) {
                             outcomes[i] = AddScorerOutcome(std::move(outcomes[i]), scored[i]);
                           }
                           queue->MarkScored(index, std::move(outcomes));
                         });
    }
    queue->CallbackDone();
  });
}

absl::StatusOr<v1::TrainStepRequest> RlLoop::BuildTrainBatch(
    const std::vector<std::shared_ptr<PromptInFlight>>& batch, int64_t trainer_version,
    StepRecord* record) {
  v1::TrainStepRequest request;
  int64_t num_samples = 0, num_failed = 0, num_correct = 0, num_scored = 0;
  int64_t groups_dropped = 0, generated_tokens = 0, environment_tokens = 0;
  int64_t prompts_trained = 0, prompts_dropped = 0, prompts_failed = 0;
  double reward_sum = 0;
  double generate_seconds = 0;
  AgeHistogram ages;
  for (const auto& prompt : batch) {
    generate_seconds = std::max(generate_seconds, Seconds(prompt->generated - prompt->submitted));
    std::vector<double> group_rewards;
    std::vector<const v1::GenerateResponse*> group_samples;
    for (size_t k = 0; k < prompt->samples.size(); ++k) {
      const v1::GenerateResponse& sample = prompt->samples[k];
      const rewards::ItemOutcome& outcome = prompt->outcomes[k];
      ++num_samples;
      generated_tokens += NumModelTokens(sample);
      environment_tokens += NumEnvironmentTokens(sample);
      if (!outcome.ok) {  // failed items never become reward 0: excluded, counted
        ++num_failed;
        continue;
      }
      ++num_scored;
      reward_sum += outcome.reward;
      num_correct += outcome.reward >= 1.0 ? 1 : 0;
      group_rewards.push_back(outcome.reward);
      group_samples.push_back(&sample);
    }
    if (group_rewards.empty()) {
      ++prompts_failed;
      continue;
    }
    absl::StatusOr<std::vector<double>> advantages =
        trainer::GroupAdvantages(group_rewards, options_.advantages);
    if (!advantages.ok()) return advantages.status();
    if (advantages->empty()) {
      ++groups_dropped;
      ++prompts_dropped;
      continue;
    }
    ++prompts_trained;
    for (size_t k = 0; k < group_samples.size(); ++k) {
      const v1::GenerateResponse& sample = *group_samples[k];
      const std::vector<int64_t> versions = ModelTokenVersions(sample);
      const int64_t rollout_index = request.rollouts_size();
      if (absl::Status s =
              CheckSampleAge(trainer_version, versions, options_.max_staleness, rollout_index);
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("prompt ", prompt->index, ": ", s.message()));
      }
      ++ages[SampleAge(trainer_version, versions)];
      AddTrainRollout(prompt->prompt_ids, sample, (*advantages)[k], prompt->index, &request);
    }
  }
  record->reward_mean = num_scored > 0 ? reward_sum / num_scored : 0.0;
  record->accuracy = num_scored > 0 ? static_cast<double>(num_correct) / num_scored : 0.0;
  record->samples = num_samples;
  record->reward_items_sent = num_samples;
  record->reward_items_scored = num_scored;
  record->reward_items_failed = num_failed;
  record->groups_dropped = groups_dropped;
  record->prompts_trained = prompts_trained;
  record->prompts_dropped_by_policy = prompts_dropped;
  record->prompts_failed = prompts_failed;
  ledger_.trained += prompts_trained;
  ledger_.dropped_by_policy += prompts_dropped;
  ledger_.failed += prompts_failed;
  record->rollouts_trained = request.rollouts_size();
  record->staleness = AgeCounts{ages};
  record->gen_tokens = generated_tokens;  // the model's tokens (observations left out)
  record->env_tokens = environment_tokens;
  record->gen_tokens_per_s = generated_tokens / std::max(1e-9, generate_seconds);
  if (request.rollouts_size() == 0) {
    // Every group was dropped (no reward variance) or failed. The trainer refuses an empty
    // batch, and the step must still happen (versions and the data cursor move in step), so
    // the first sample goes in with advantage 0: no policy-gradient signal, and its tokens
    // still count for parity. Counted in groups_dropped above.
    // The first sample with a token of the model's (a failed episode may have none).
    const PromptInFlight* prompt = nullptr;
    const v1::GenerateResponse* sample = nullptr;
    for (size_t p = 0; p < batch.size() && sample == nullptr; ++p) {
      for (const v1::GenerateResponse& candidate : batch[p]->samples) {
        if (NumModelTokens(candidate) > 0) {
          prompt = batch[p].get();
          sample = &candidate;
          break;
        }
      }
    }
    if (sample == nullptr) {
      std::string reason = "no sample has a token of the model's";
      for (const auto& p : batch) {
        for (const rewards::ItemOutcome& outcome : p->outcomes) {
          if (!outcome.ok) {
            reason = outcome.error;
            break;
          }
        }
      }
      return absl::FailedPreconditionError(
          absl::StrCat("step ", step_ + 1, ": nothing to train on: ", reason));
    }
    const std::vector<int64_t> versions = ModelTokenVersions(*sample);
    if (absl::Status s = CheckSampleAge(trainer_version, versions, options_.max_staleness, 0);
        !s.ok()) {
      return s;
    }
    AddTrainRollout(prompt->prompt_ids, *sample, 0.0, prompt->index, &request);
  }
  int64_t model_tokens = 0, masked_tokens = 0;
  for (const v1::Rollout& rollout : request.rollouts()) {
    if (rollout.loss_mask_size() == 0) {
      model_tokens += rollout.completion_token_ids_size();
      continue;
    }
    for (bool keep : rollout.loss_mask()) (keep ? model_tokens : masked_tokens) += 1;
  }
  record->rollout_model_tokens = model_tokens;
  record->rollout_environment_tokens = masked_tokens;
  return request;
}

absl::Status RlLoop::CheckParity(const v1::TrainStepRequest& request,
                                 const v1::StepMetrics& metrics) {
  const v1::ParityStats& parity = metrics.parity();
  if (options_.parity != "strict" || !parity.has_mismatch()) return absl::OkStatus();
  const int64_t r = parity.mismatch_rollout();
  std::string sequence;
  if (r >= 0 && r < request.rollouts_size()) {
    const v1::Rollout& rollout = request.rollouts(r);
    sequence = absl::StrCat(" (prompt ", rollout.group_id(), ", ", rollout.prompt_token_ids_size(),
                            " prompt tokens, ", rollout.completion_token_ids_size(),
                            " completion tokens)");
  }
  return absl::DataLossError(absl::StrCat(
      "parity = \"strict\": trainer and generator log-probs differ at step ", step_ + 1,
      ": rollout ", r, sequence, ", completion position ", parity.mismatch_position(), ": trainer ",
      absl::StrFormat("%.9g", parity.mismatch_trainer_logprob()), " vs generator ",
      absl::StrFormat("%.9g", parity.mismatch_generator_logprob()),
      " (", parity.tokens_mismatched(), " of ", parity.tokens_compared(),
      " tokens differ). Investigate with: ", InvestigateHint()));
}

std::string RlLoop::InvestigateHint() const {
  if (mismatch_recorder_ != nullptr && mismatch_recorder_->steps_recorded() > 0) {
    return absl::StrCat("lockstep diagnose ", options_.mismatch_records.run_dir.string(),
                        " (replays the recorded rollouts under ",
                        diagnose::MismatchDir(options_.mismatch_records.run_dir).string(), ")");
  }
  return options_.investigate_hint.empty() ? "lockstep diagnose" : options_.investigate_hint;
}

std::string RlLoop::DataCursor() const {
  const DatasetCursor cursor =
      cursors_in_flight_.empty() ? iterator_.cursor() : cursors_in_flight_.front();
  return nlohmann::json{{"dataset", cursor.ToJson()}, {"rl_steps", step_}}.dump();
}

absl::StatusOr<std::pair<DatasetCursor, int64_t>> RlLoop::ParseDataCursor(const std::string& text) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("dataset") || !json.contains("rl_steps") ||
      !json["rl_steps"].is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data cursor: expected {\"dataset\": …, \"rl_steps\": N}, got '", text, "'"));
  }
  absl::StatusOr<DatasetCursor> cursor = DatasetCursor::FromJson(json["dataset"]);
  if (!cursor.ok()) return cursor.status();
  return std::make_pair(*cursor, json["rl_steps"].get<int64_t>());
}

}  // namespace lockstep::orchestrator
