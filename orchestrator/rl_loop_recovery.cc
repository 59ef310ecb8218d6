// RlLoop's recovery from dead generators (rl_loop.h, generator_recovery.h): the loop thread runs
// TendGenerators while it waits for a batch (every 100 ms and at once after a failed call),
// FinishRestarts before a step's sync while a generator is still restarting, and RecoverSync
// when a weight sync failed.
//
// A dead generator comes back in the background. Its lost prompts are shared: the live
// generators take their share at once (live / (live + restarting) of them, the oldest), the rest
// wait for whichever generator is idle first — the restarted one as soon as it holds the
// current weights, or a live one that has finished its calls. So a restarted generator works
// in the step it died in, and no generator idles while a lost prompt waits.
//
// A generation call can fail before the supervisor has reaped its generator (the socket closes
// as the process dies), so a failed call waits a moment for the death to be confirmed; a call
// that failed on a generator that still runs is a real error and stops the loop, as without
// recovery. A call that went to an earlier incarnation of a generator (restarted since) was lost
// with it.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "orchestrator/rl_loop.h"

namespace lockstep::orchestrator {
namespace {

// How long a failed call waits for its generator's death to be confirmed.
constexpr absl::Duration kDeathConfirmation = absl::Seconds(3);

bool Contains(const std::vector<GeneratorDeath>& dead, int64_t g) {
  return std::any_of(dead.begin(), dead.end(),
                     [g](const GeneratorDeath& death) { return death.generator == g; });
}

// Adds `more` to `dead`, each generator once.
void AddDeaths(std::vector<GeneratorDeath> more, std::vector<GeneratorDeath>& dead) {
  for (GeneratorDeath& death : more) {
    if (!Contains(dead, death.generator)) dead.push_back(std::move(death));
  }
}

}  // namespace

PromptLedger RlLoop::ledger() const {
  PromptLedger ledger = ledger_;
  ledger.in_flight = queue_->size();
  return ledger;
}

void RlLoop::Resubmit(const std::shared_ptr<PromptInFlight>& prompt, int64_t generator) {
  queue_->Resubmit(prompt, generator, services_.recovery->incarnation(generator));
  ++ledger_.resubmitted;
  ++step_resubmitted_;
  StartGeneration(prompt);
}

absl::Status RlLoop::StartRestarts(const std::vector<GeneratorDeath>& dead) {
  std::vector<int64_t> dead_incarnations;
  for (const GeneratorDeath& death : dead) {
    dead_incarnations.push_back(services_.recovery->incarnation(death.generator));
  }
  if (absl::Status s = services_.recovery->StartRestarts(dead); !s.ok()) return s;
  step_restarts_ += static_cast<int64_t>(dead.size());
  for (size_t i = 0; i < dead.size(); ++i) {
    const GeneratorDeath& death = dead[i];
    // A generator restarted again before its last process returned anything: time the newest.
    awaited_first_samples_.erase(
        std::remove_if(awaited_first_samples_.begin(), awaited_first_samples_.end(),
                       [&](const AwaitedFirstSamples& a) { return a.generator == death.generator; }),
        awaited_first_samples_.end());
    // Any process after the dead one (one that dies while loading is replaced).
    awaited_first_samples_.push_back(
        {death.generator, death.name, death.time, dead_incarnations[i] + 1});
  }
  return absl::OkStatus();
}

std::vector<FirstSampleRecord> RlLoop::TakeFirstSamples() {
  std::vector<FirstSampleRecord> arrived;
  std::vector<AwaitedFirstSamples> still_awaited;
  for (AwaitedFirstSamples& awaited : awaited_first_samples_) {
    std::optional<absl::Time> first = queue_->FirstSamples(awaited.generator, awaited.incarnation);
    if (first.has_value()) {
      arrived.push_back({awaited.name, absl::ToDoubleSeconds(*first - awaited.death)});
    } else {
      still_awaited.push_back(std::move(awaited));
    }
  }
  awaited_first_samples_ = std::move(still_awaited);
  return arrived;
}

void RlLoop::ShareLostPrompts(const std::vector<std::shared_ptr<PromptInFlight>>& lost) {
  std::vector<int64_t> live;
  for (int64_t g = 0; g < static_cast<int64_t>(services_.generators.size()); ++g) {
    if (!services_.recovery->restarting(g)) live.push_back(g);
  }
  // The live generators' share, oldest prompts first (the next batch needs those first): live
  // of (live + restarting) of the lost prompts, rounded down.
  const size_t num_live = live.size();
  const size_t num_now =
      lost.size() * num_live / (num_live + services_.recovery->num_restarting());
  for (size_t i = 0; i < lost.size(); ++i) {
    if (i < num_now) {
      Resubmit(lost[i], live[next_live_++ % num_live]);
    } else {
      waiting_.push_back(lost[i]);
    }
  }
}

void RlLoop::GiveWaitingToIdle(const std::vector<GeneratorDeath>& back) {
  if (waiting_.empty()) return;
  // The generators just back first: they are idle for sure, and a live one that is idle now
  // has its calls' callbacks (and maybe the next batch) to go on with.
  std::vector<int64_t> idle;
  for (const GeneratorDeath& death : back) idle.push_back(death.generator);
  for (int64_t g = 0; g < static_cast<int64_t>(services_.generators.size()); ++g) {
    if (!Contains(back, g) && !services_.recovery->restarting(g) &&
        queue_->calls_in_flight(g) == 0) {
      idle.push_back(g);
    }
  }
  if (idle.empty()) return;
  for (size_t i = 0; i < waiting_.size(); ++i) Resubmit(waiting_[i], idle[i % idle.size()]);
  waiting_.clear();
}

absl::Status RlLoop::TendGenerators() {
  std::vector<std::shared_ptr<PromptInFlight>> failed = queue_->TakeFailedCalls();
  std::vector<GeneratorDeath> dead;
  AddDeaths(services_.recovery->TakeDeaths(), dead);
  // A failed call of the generator's current process: confirm that it died.
  for (const auto& prompt : failed) {
    const int64_t g = prompt->generator;
    if (prompt->incarnation < services_.recovery->incarnation(g) || Contains(dead, g) ||
        services_.recovery->restarting(g)) {
      continue;
    }
    std::optional<GeneratorDeath> death = services_.recovery->WaitForDeath(g, kDeathConfirmation);
    if (!death.has_value()) {
      return absl::Status(prompt->call_error.code(),
                          absl::StrCat("prompt ", prompt->index, ": ", prompt->call_error.message()));
    }
    AddDeaths({*death}, dead);
    AddDeaths(services_.recovery->TakeDeaths(), dead);
  }
  // The dead come back in the background (their new processes load while the rest works).
  if (!dead.empty()) {
    if (absl::Status s = StartRestarts(dead); !s.ok()) return s;
  }
  std::vector<std::shared_ptr<PromptInFlight>> lost;
  for (const auto& prompt : failed) {
    if (services_.recovery->restarting(prompt->generator)) {
      lost.push_back(prompt);
    } else {
      Resubmit(prompt, prompt->generator);  // lost with an earlier process; this one runs
    }
  }
  if (!lost.empty()) ShareLostPrompts(lost);
  absl::StatusOr<std::vector<GeneratorDeath>> back =
      services_.recovery->PollRestarts(trainer_version_);
  if (!back.ok()) return back.status();
  if (!back->empty()) services_.generators = services_.recovery->generators();
  GiveWaitingToIdle(*back);
  return absl::OkStatus();
}

absl::StatusOr<SyncFigures> RlLoop::FinishRestarts(const std::vector<GeneratorDeath>& dead,
                                                    int64_t version) {
  // RestartGenerators re-forms the group and sends `version` to every generator.
  const absl::Time start = absl::Now();
  absl::Status s = StartRestarts(dead);
  if (s.ok()) s = services_.recovery->RestartGenerators({}, version);
  if (!s.ok()) {
    // The trainer did take the step: a checkpoint written now continues after it.
    trainer_version_ = version;
    ++step_;
    return s;
  }
  services_.generators = services_.recovery->generators();
  SyncFigures figures;
  figures.version = version;
  figures.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return figures;
}

absl::StatusOr<SyncFigures> RlLoop::RecoverSync(absl::Status failed, int64_t version) {
  if (services_.recovery == nullptr) return failed;
  // A peer that died mid-broadcast may fail the sync a moment before it is reaped.
  std::vector<GeneratorDeath> dead;
  const absl::Time deadline = absl::Now() + kDeathConfirmation;
  while (true) {
    AddDeaths(services_.recovery->TakeDeaths(), dead);
    if (!dead.empty() || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (dead.empty()) return failed;
  return FinishRestarts(dead, version);
}

}  // namespace lockstep::orchestrator
