// RlLoop's recovery from dead generators (rl_loop.h, generator_recovery.h): the loop thread runs
// TendGenerators while it waits for a batch, and RecoverSync when a weight sync failed.
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

absl::Status RlLoop::RestartDead(const std::vector<GeneratorDeath>& dead, int64_t version) {
  absl::Status restarted = services_.recovery->RestartGenerators(dead, version);
  if (!restarted.ok()) return restarted;
  services_.generators = services_.recovery->generators();
  step_restarts_ += static_cast<int64_t>(dead.size());
  for (const GeneratorDeath& death : dead) {
    // A generator restarted again before its last process returned anything: time the newest.
    awaited_first_samples_.erase(
        std::remove_if(awaited_first_samples_.begin(), awaited_first_samples_.end(),
                       [&](const AwaitedFirstSamples& a) { return a.generator == death.generator; }),
        awaited_first_samples_.end());
    awaited_first_samples_.push_back({death.generator, death.name, death.time,
                                      services_.recovery->incarnation(death.generator)});
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

absl::Status RlLoop::TendGenerators() {
  std::vector<std::shared_ptr<PromptInFlight>> failed = queue_->TakeFailedCalls();
  std::vector<GeneratorDeath> dead;
  AddDeaths(services_.recovery->TakeDeaths(), dead);
  if (failed.empty() && dead.empty()) return absl::OkStatus();
  // A failed call of the generator's current process: confirm that it died.
  for (const auto& prompt : failed) {
    const int64_t g = prompt->generator;
    if (prompt->incarnation < services_.recovery->incarnation(g) || Contains(dead, g)) continue;
    std::optional<GeneratorDeath> death = services_.recovery->WaitForDeath(g, kDeathConfirmation);
    if (!death.has_value()) {
      return absl::Status(prompt->call_error.code(),
                          absl::StrCat("prompt ", prompt->index, ": ", prompt->call_error.message()));
    }
    AddDeaths({*death}, dead);
    AddDeaths(services_.recovery->TakeDeaths(), dead);
  }
  // Live generators take the lost prompts at once; the rest wait for the restart.
  std::vector<int64_t> live;
  for (int64_t g = 0; g < static_cast<int64_t>(services_.generators.size()); ++g) {
    if (!Contains(dead, g)) live.push_back(g);
  }
  std::vector<std::shared_ptr<PromptInFlight>> waiting;
  for (const auto& prompt : failed) {
    if (!Contains(dead, prompt->generator)) {
      Resubmit(prompt, prompt->generator);  // lost with an earlier process; this one runs
    } else if (!live.empty()) {
      Resubmit(prompt, live[next_live_++ % live.size()]);
    } else {
      waiting.push_back(prompt);
    }
  }
  if (!dead.empty()) {
    if (absl::Status s = RestartDead(dead, trainer_version_); !s.ok()) return s;
  }
  for (const auto& prompt : waiting) Resubmit(prompt, prompt->generator);
  return absl::OkStatus();
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
  // RestartGenerators re-forms the group and sends `version` to every generator.
  const absl::Time start = absl::Now();
  if (absl::Status s = RestartDead(dead, version); !s.ok()) {
    // The trainer did take the step: a checkpoint written now continues after it.
    trainer_version_ = version;
    ++step_;
    return s;
  }
  SyncFigures figures;
  figures.version = version;
  figures.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return figures;
}

}  // namespace lockstep::orchestrator
