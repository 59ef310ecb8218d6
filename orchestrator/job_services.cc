#include "orchestrator/job_services.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/free_port.h"
#include "common/openmp_wait.h"
#include "orchestrator/weight_sync_driver.h"

namespace lockstep::orchestrator {
namespace {

v1::WeightSyncTransport Transport(const std::string& name) {
  if (name == "gloo") return v1::WEIGHT_SYNC_TRANSPORT_GLOO;
  if (name == "shm") return v1::WEIGHT_SYNC_TRANSPORT_SHARED_MEMORY;
  if (name == "nccl") return v1::WEIGHT_SYNC_TRANSPORT_NCCL;
  if (name == "cuda_ipc") return v1::WEIGHT_SYNC_TRANSPORT_CUDA_IPC;
  return v1::WEIGHT_SYNC_TRANSPORT_AUTO;
}

// A console duration to the millisecond ("3.841s").
std::string Ms(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

}  // namespace

absl::Status JobServices::Start(const ServiceLaunch& launch, const Log& log) {
  log_ = log;
  launch_ = launch;
  auth_token_ = launch.auth_token;
  // On the watcher thread, the moment the child is reaped: straight to stderr (the progress
  // line belongs to the loop thread).
  supervisor_.SetExitObserver([](const ChildExit& exit) {
    std::fprintf(stderr, "lockstep run: service %s (pid %d) %s\n", exit.name.c_str(),
                 static_cast<int>(exit.pid), exit.how.c_str());
  });
  auto log_path = [&](const std::string& name) {
    return absl::StrCat(launch.logs_dir, "/", name, ".log");
  };
  if (config_.trainer.address.empty()) {
    std::vector<std::string> argv = TrainerArgv(launch.resume_checkpoint);
    absl::StatusOr<pid_t> pid =
        supervisor_.Start({"trainer", argv, TrainingOpenMpEnvironment(), log_path("trainer")});
    if (!pid.ok()) return pid.status();
  }
  std::vector<std::string> generator_names;
  if (config_.generator.addresses.empty()) {
    for (int64_t g = 0; g < config_.generator.count; ++g) {
      const std::string name = absl::StrCat("generator", g);
      absl::StatusOr<pid_t> pid = supervisor_.Start(
          {name,
           {launch.lockstep_binary, "serve", "generator", "--model", launch.model_dir, "--mode",
            config_.model.mode, "--threads", std::to_string(config_.generator.threads),
            "--kv-bytes", std::to_string(config_.generator.kv_bytes), "--port", "0",
            "--auth-token-file", launch.auth_token_path},
           {},
           log_path(name)});
      if (!pid.ok()) return pid.status();
      generator_names.push_back(name);
    }
  }
  if (absl::Status s = rewards_.Launch(supervisor_, launch.lockstep_binary, launch.auth_token_path,
                                       launch.logs_dir);
      !s.ok()) {
    return s;
  }
  // Wait for every child (they start in parallel).
  std::string trainer_address = config_.trainer.address;
  if (trainer_address.empty()) {
    absl::StatusOr<std::string> address = supervisor_.WaitUntilServing("trainer");
    if (!address.ok()) return address.status();
    trainer_address = *address;
  }
  trainer_ = std::make_unique<TrainerClient>(trainer_address, launch.auth_token);
  std::vector<std::string> generator_addresses = config_.generator.addresses;
  for (const std::string& name : generator_names) {
    absl::StatusOr<std::string> address = supervisor_.WaitUntilServing(name);
    if (!address.ok()) return address.status();
    generator_addresses.push_back(*address);
  }
  for (const std::string& address : generator_addresses) {
    generator_clients_.push_back(std::make_unique<GeneratorClient>(address, launch.auth_token));
    generators_.push_back(generator_clients_.back().get());
    incarnations_.push_back(0);
  }
  log(absl::StrCat("trainer at ", trainer_address, ", ", generators_.size(), " generator(s) at ",
                   absl::StrJoin(generator_addresses, ", ")));
  if (absl::Status s = rewards_.Connect(supervisor_, launch.auth_token); !s.ok()) return s;
  if (rewards_.scorer() != nullptr) log(absl::StrCat("reward: ", rewards_.scorer()->name()));
  if (rewards_.environment() != nullptr) {
    log(absl::StrCat("environment at ", rewards_.environment_address(), ", up to ",
                     config_.environment.max_turns, " turn(s) per episode"));
  }
  return absl::OkStatus();
}

absl::Status JobServices::FormWeightSyncGroup(const Log& log) {
  absl::StatusOr<int> store_port = PickFreePort();
  if (!store_port.ok()) return store_port.status();
  WeightSyncGroupOptions group;
  group.store_port = *store_port;
  group.group_name = absl::StrCat("sync-", NewAuthToken().substr(0, 8));
  group.timeout_ms = config_.weight_sync.timeout_ms;
  group.bucket_bytes = config_.weight_sync.bucket_mb << 20;
  group.verify = config_.weight_sync.verify;
  group.transport = Transport(config_.weight_sync.transport);
  absl::StatusOr<v1::JoinWeightSyncResponse> joined =
      orchestrator::FormWeightSyncGroup(*trainer_, generators_, group);
  // A survivor of a failed broadcast may still be finishing its call: once more after a pause.
  if (!joined.ok() && absl::IsFailedPrecondition(joined.status()) &&
      joined.status().message().find("in progress") != std::string::npos) {
    absl::SleepFor(absl::Seconds(1));
    group.group_name = absl::StrCat("sync-", NewAuthToken().substr(0, 8));
    joined = orchestrator::FormWeightSyncGroup(*trainer_, generators_, group);
  }
  if (!joined.ok()) {
    // The services judge a transport against where their weights live; name the key that chose it.
    if (config_.weight_sync.transport == "auto") return joined.status();
    return absl::Status(joined.status().code(),
                        absl::StrCat("[weight_sync] transport = \"", config_.weight_sync.transport,
                                     "\": ", joined.status().message()));
  }
  log(absl::StrCat("weight-sync group formed: ", joined->num_parameters(), " tensors, ",
                   joined->total_bytes() / 1e6, " MB in ", joined->num_buckets(), " bucket(s)"));
  return absl::OkStatus();
}

absl::Status JobServices::Sync(int64_t version) {
  return SyncWeights(*trainer_, generators_, version,
                     absl::Milliseconds(config_.weight_sync.timeout_ms) + absl::Seconds(10))
      .status();
}

std::vector<std::string> JobServices::TrainerArgv(const std::string& resume_dir) const {
  std::vector<std::string> argv = {launch_.lockstep_binary,
                                   "serve",
                                   "trainer",
                                   "--model",
                                   launch_.model_dir,
                                   "--options",
                                   launch_.trainer_options_path,
                                   "--threads",
                                   std::to_string(config_.trainer.threads),
                                   "--port",
                                   "0",
                                   "--auth-token-file",
                                   launch_.auth_token_path};
  if (!resume_dir.empty()) {
    argv.push_back("--resume");
    argv.push_back(resume_dir);
  }
  return argv;
}

bool JobServices::TrainerDied(absl::Duration wait) {
  if (!config_.trainer.address.empty()) return false;  // not ours
  return supervisor_.WaitForExit("trainer", wait).has_value();
}

absl::Status JobServices::RestartTrainer() {
  std::optional<ChildExit> exit = supervisor_.WaitForExit("trainer", absl::ZeroDuration());
  if (!exit.has_value()) return absl::FailedPreconditionError("the trainer still runs");
  int64_t& count = restarts_["trainer"];
  const int64_t max_restarts = config_.trainer.max_restarts;
  if (count >= max_restarts) {
    return RestartBudgetSpentError(absl::StrCat(
        "service trainer ", exit->how, " and its restart budget is spent ([trainer] ",
        "max_restarts = ", max_restarts, "); --resume continues from the last checkpoint"));
  }
  ++count;
  // Its checkpoints, when it finished one (else it starts over, as the job then does). A write
  // it died in leaves only a step_N.tmp directory, which does not count.
  std::error_code error;
  const std::string& checkpoints = launch_.checkpoints_dir;
  bool has_checkpoint = false;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoints, error)) {
    const std::string name = entry.path().filename().string();
    has_checkpoint |= entry.is_directory() && name.rfind("step_", 0) == 0 &&
                      name.find('.') == std::string::npos;
  }
  log_(absl::StrCat("restarting the trainer (restart ", count, " of ", max_restarts, ") from ",
                    has_checkpoint ? "its last checkpoint" : "the start", ": it ", exit->how));
  absl::StatusOr<pid_t> pid =
      supervisor_.Restart("trainer", TrainerArgv(has_checkpoint ? checkpoints : ""));
  if (!pid.ok()) return pid.status();
  absl::StatusOr<std::string> address = supervisor_.WaitUntilServing("trainer");
  if (!address.ok()) return address.status();
  trainer_ = std::make_unique<TrainerClient>(*address, auth_token_);
  // Generators that died around the trainer's death, before the loop saw it, come back first: a
  // dead member would leave the others waiting out the group's timeout. The job's Resume then
  // sends every generator the checkpoint's weights.
  // Restarts the loop had started are finished here too.
  if (absl::Status s = StartRestarts(TakeDeaths()); !s.ok()) return s;
  absl::StatusOr<std::vector<GeneratorDeath>> generators_back = AwaitRestartsServing();
  if (!generators_back.ok()) return generators_back.status();
  if (absl::Status s = FormWeightSyncGroup(log_); !s.ok()) return s;
  for (const GeneratorDeath& death : *generators_back) {
    restart_records_.push_back(
        {death.name, death.how, absl::ToDoubleSeconds(absl::Now() - death.time)});
    log_(absl::StrCat(death.name, " is back at ", generators_[death.generator]->address()));
  }
  restart_records_.push_back(
      {"trainer", exit->how, absl::ToDoubleSeconds(absl::Now() - exit->time)});
  log_(absl::StrCat("the trainer is back at ", *address, ", ", Ms(absl::Now() - exit->time),
                    " after its death"));
  return absl::OkStatus();
}

int64_t JobServices::GeneratorIndex(const std::string& name) {
  constexpr absl::string_view kPrefix = "generator";
  int64_t index = -1;
  if (absl::string_view(name).substr(0, kPrefix.size()) != kPrefix ||
      !absl::SimpleAtoi(absl::string_view(name).substr(kPrefix.size()), &index)) {
    return -1;
  }
  return index;
}

void JobServices::RestartSideService(const ChildExit& exit) {
  int64_t& count = restarts_[exit.name];
  const int64_t max_restarts = config_.rewards.max_restarts;
  if (count >= max_restarts) {
    log_(absl::StrCat("service ", exit.name, " ", exit.how, " and its restart budget is spent",
                      " ([rewards] max_restarts = ", max_restarts,
                      "): its items fail and are counted"));
    return;
  }
  ++count;
  log_(absl::StrCat("restarting ", exit.name, " (restart ", count, " of ", max_restarts,
                    "): it ", exit.how));
  // The same argv, so the same port: the reward and environment clients reach it again (their
  // retries of the items in flight included).
  absl::StatusOr<pid_t> pid = supervisor_.Restart(exit.name);
  absl::StatusOr<std::string> address =
      pid.ok() ? supervisor_.WaitUntilServing(exit.name) : pid.status();
  if (!address.ok()) {
    log_(absl::StrCat("cannot restart ", exit.name, ": ", address.status().message()));
    return;
  }
  restart_records_.push_back(
      {exit.name, exit.how, absl::ToDoubleSeconds(absl::Now() - exit.time)});
  log_(absl::StrCat(exit.name, " is back at ", *address, ", ", Ms(absl::Now() - exit.time),
                    " after its death"));
}

std::vector<GeneratorDeath> JobServices::TakeDeaths() {
  std::vector<GeneratorDeath> deaths;
  for (const ChildExit& exit : supervisor_.TakeExits()) {
    const int64_t g = GeneratorIndex(exit.name);
    if (g >= 0 && g < static_cast<int64_t>(generators_.size())) {
      // A process that died while loading is AdvanceRestarts' to start again; an exit of a
      // process replaced since is old news.
      if (restarting(g) || exit.pid != supervisor_.pid(exit.name)) continue;
      deaths.push_back({g, exit.name, exit.how, exit.time});
    } else if (exit.name != "trainer") {
      RestartSideService(exit);  // a reward or environment server
    }
    // The trainer's death surfaces as its calls' errors.
  }
  return deaths;
}

std::optional<GeneratorDeath> JobServices::WaitForDeath(int64_t g, absl::Duration timeout) {
  if (!config_.generator.addresses.empty()) return std::nullopt;  // not ours
  const std::string name = absl::StrCat("generator", g);
  std::optional<ChildExit> exit = supervisor_.WaitForExit(name, timeout);
  if (!exit.has_value()) return std::nullopt;
  return GeneratorDeath{g, name, exit->how, exit->time};
}

absl::Status JobServices::ScheduleRestart(const GeneratorDeath& death) {
  const int64_t max_restarts = config_.generator.max_restarts;
  int64_t& count = restarts_[death.name];
  if (count >= max_restarts) {
    return RestartBudgetSpentError(absl::StrCat(
        "service ", death.name, " ", death.how, " and its restart budget is spent ([generator] ",
        "max_restarts = ", max_restarts, "); stopping after a checkpoint (--resume continues)"));
  }
  const absl::Duration backoff =
      count == 0 ? absl::ZeroDuration() : absl::Seconds(1 << std::min<int64_t>(count - 1, 3));
  ++count;
  log_(absl::StrCat("restarting ", death.name, " (restart ", count, " of ", max_restarts,
                    "): it ", death.how));
  restarting_[death.generator] = {death, absl::Now() + backoff};
  return absl::OkStatus();
}

absl::Status JobServices::StartRestarts(const std::vector<GeneratorDeath>& dead) {
  for (const GeneratorDeath& death : dead) {
    if (restarting(death.generator)) continue;
    if (absl::Status s = ScheduleRestart(death); !s.ok()) return s;
  }
  return AdvanceRestarts().status();  // the processes without backoff start now
}

absl::StatusOr<bool> JobServices::AdvanceRestarts() {
  bool all_serving = true;
  for (auto& [g, restart] : restarting_) {
    const std::string& name = restart.death.name;
    if (!restart.started) {
      if (absl::Now() < restart.not_before) {
        all_serving = false;
        continue;
      }
      absl::StatusOr<pid_t> pid = supervisor_.Restart(name);
      if (!pid.ok()) return pid.status();
      restart.started = true;
      restart.started_at = absl::Now();
      ++incarnations_[g];
    }
    if (!restart.address.empty()) continue;
    // A zero timeout looks once: DeadlineExceeded means "not yet" (for ReadyOptions' timeout).
    ReadyOptions look_once;
    look_once.timeout = absl::ZeroDuration();
    absl::StatusOr<std::string> address = supervisor_.WaitUntilServing(name, look_once);
    if (absl::IsDeadlineExceeded(address.status()) &&
        absl::Now() - restart.started_at < ReadyOptions().timeout) {
      all_serving = false;
      continue;
    }
    if (absl::IsUnavailable(address.status())) {  // died while loading: again, within budget
      log_(std::string(address.status().message()));
      // Dead already; the wait only covers the observer still printing the exit.
      std::optional<ChildExit> exit = supervisor_.WaitForExit(name, absl::Seconds(1));
      GeneratorDeath again = restart.death;  // timed from the first death
      if (exit.has_value()) again.how = exit->how;
      if (absl::Status s = ScheduleRestart(again); !s.ok()) return s;
      all_serving = false;
      continue;
    }
    if (!address.ok()) return address.status();
    restart.address = *address;
    generator_clients_.push_back(std::make_unique<GeneratorClient>(*address, auth_token_));
    generators_[g] = generator_clients_.back().get();
    log_(absl::StrCat(name, " serves again at ", *address, ", ",
                      Ms(absl::Now() - restart.death.time), " after its death"));
  }
  return all_serving;
}

absl::StatusOr<std::vector<GeneratorDeath>> JobServices::AwaitRestartsServing() {
  while (true) {
    absl::StatusOr<bool> all_serving = AdvanceRestarts();
    if (!all_serving.ok()) return all_serving.status();
    if (*all_serving) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::vector<GeneratorDeath> back;
  for (const auto& [g, restart] : restarting_) back.push_back(restart.death);
  restarting_.clear();
  return back;
}

absl::StatusOr<std::vector<GeneratorDeath>> JobServices::PollRestarts(int64_t weight_version) {
  if (restarting_.empty()) return std::vector<GeneratorDeath>();
  absl::StatusOr<bool> all_serving = AdvanceRestarts();
  if (!all_serving.ok()) return all_serving.status();
  if (!*all_serving) return std::vector<GeneratorDeath>();
  absl::StatusOr<std::vector<GeneratorDeath>> back = AwaitRestartsServing();  // returns at once
  if (!back.ok()) return back.status();
  const absl::Time group_start = absl::Now();
  if (absl::Status s = FormWeightSyncGroup(log_); !s.ok()) return s;
  const absl::Time sync_start = absl::Now();
  if (absl::Status s = Sync(weight_version); !s.ok()) return s;
  for (const GeneratorDeath& death : *back) {
    restart_records_.push_back(
        {death.name, death.how, absl::ToDoubleSeconds(absl::Now() - death.time)});
    log_(absl::StrCat(death.name, " is back at ", generators_[death.generator]->address(),
                      " with weights version ", weight_version, ", ", Ms(absl::Now() - death.time),
                      " after its death (group ", Ms(sync_start - group_start), ", weights ",
                      Ms(absl::Now() - sync_start), ")"));
  }
  return back;
}

}  // namespace lockstep::orchestrator
