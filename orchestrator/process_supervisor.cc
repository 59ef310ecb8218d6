#include "orchestrator/process_supervisor.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <deque>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/child_process.h"
#include "orchestrator/service_health.h"

namespace lockstep::orchestrator {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// "HOST:PORT" from the last "serving on HOST:PORT" line in `text`, or "".
std::string ServingAddress(const std::string& text) {
  static const std::regex kServing(R"(serving on (\S+):(\d+))");
  std::string address;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kServing);
       it != std::sregex_iterator(); ++it) {
    address = absl::StrCat((*it)[1].str(), ":", (*it)[2].str());
  }
  return address;
}

std::string ReadFrom(const std::string& path, off_t offset) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return "";
  file.seekg(offset);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

std::string HowItEnded(int wait_status) {
  if (wait_status == -1) return "exited (status unknown)";
  if (WIFSIGNALED(wait_status)) return absl::StrCat("was ", DescribeWaitStatus(wait_status));
  return DescribeWaitStatus(wait_status);
}

}  // namespace

std::string LogTail(const std::string& path, int max_lines) {
  std::ifstream file(path);
  if (!file) return "";
  std::deque<std::string> lines;
  for (std::string line; std::getline(file, line);) {
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

ProcessSupervisor::~ProcessSupervisor() {
  StopAll();
  std::vector<std::thread> watchers;
  {
    absl::MutexLock lock(&mu_);
    watchers.swap(watchers_);
  }
  for (std::thread& watcher : watchers) watcher.join();
}

void ProcessSupervisor::SetExitObserver(std::function<void(const ChildExit&)> observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

absl::Status ProcessSupervisor::Spawn(Child& child) {
  struct stat log_stat;
  const off_t log_offset =
      stat(child.spec.log_path.c_str(), &log_stat) == 0 ? log_stat.st_size : 0;
  ChildProcessOptions options;
  options.argv = child.spec.argv;
  options.env = child.spec.env;
  options.output_path = child.spec.log_path;
  options.own_process_group = true;
  options.die_with_parent = true;
  absl::StatusOr<pid_t> pid = StartChildProcess(options);
  if (!pid.ok()) {
    return absl::Status(pid.status().code(), absl::StrCat("cannot start ", child.spec.name, ": ",
                                                          pid.status().message()));
  }
  child.pid = *pid;
  child.log_offset = log_offset;
  child.exited = false;
  child.observed = false;
  child.wait_status = 0;
  watchers_.emplace_back(&ProcessSupervisor::Watch, this, child.spec.name, *pid);
  return absl::OkStatus();
}

void ProcessSupervisor::Watch(std::string name, pid_t pid) {
  int status = 0;
  pid_t result;
  do {
    result = waitpid(pid, &status, 0);
  } while (result < 0 && errno == EINTR);
  if (result < 0) status = -1;  // reaped elsewhere; the status is unknown
  std::function<void(const ChildExit&)> observer;
  ChildExit exit;
  {
    absl::MutexLock lock(&mu_);
    Child* child = Find(name);
    if (child == nullptr || child->pid != pid) return;
    child->exited = true;
    child->wait_status = status;
    child->exit_time = absl::Now();
    if (stopping_) {
      child->observed = true;
      return;
    }
    exit = ExitOf(*child);
    exits_.push_back(exit);
    observer = observer_;
  }
  if (observer) observer(exit);
  absl::MutexLock lock(&mu_);
  Child* child = Find(name);
  if (child != nullptr && child->pid == pid) child->observed = true;
}

absl::StatusOr<pid_t> ProcessSupervisor::Start(const ChildSpec& spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("child process: empty name");
  if (spec.argv.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("child ", spec.name, ": empty argv"));
  }
  if (spec.log_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("child ", spec.name, ": no log path"));
  }
  absl::MutexLock lock(&mu_);
  if (Find(spec.name) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("child ", spec.name, " already started"));
  }
  auto child = std::make_unique<Child>();
  child->spec = spec;
  if (absl::Status s = Spawn(*child); !s.ok()) return s;
  const pid_t pid = child->pid;
  children_.push_back(std::move(child));
  return pid;
}

absl::StatusOr<pid_t> ProcessSupervisor::Restart(const std::string& name,
                                                 std::vector<std::string> argv) {
  absl::MutexLock lock(&mu_);
  Child* child = Find(name);
  if (child == nullptr) return absl::NotFoundError(absl::StrCat("no child named ", name));
  if (!child->exited) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot restart ", name, ": it still runs (pid ", child->pid, ")"));
  }
  if (!argv.empty()) child->spec.argv = std::move(argv);
  if (absl::Status s = Spawn(*child); !s.ok()) return s;
  return child->pid;
}

absl::StatusOr<std::string> ProcessSupervisor::WaitUntilServing(const std::string& name,
                                                                const ReadyOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  std::string log_path;
  off_t log_offset = 0;
  {
    absl::MutexLock lock(&mu_);
    Child* child = Find(name);
    if (child == nullptr) return absl::NotFoundError(absl::StrCat("no child named ", name));
    log_path = child->spec.log_path;
    log_offset = child->log_offset;
  }
  auto exited_error = [&]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    Child* child = Find(name);
    if (!child->exited) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat("service ", name, " stopped before serving: it ", DescribeExit(*child)));
  };

  std::string address;
  while (address.empty()) {
    // Read the log before checking for exit, so a line printed just before exiting counts.
    address = ServingAddress(ReadFrom(log_path, log_offset));
    if (!address.empty()) break;
    if (absl::Status exited = exited_error(); !exited.ok()) return exited;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("service ", name, " printed no \"serving on HOST:PORT\" line within ",
                       absl::FormatDuration(options.timeout), " (log: ", log_path,
                       "); last lines:\n", LogTail(log_path)));
    }
    absl::SleepFor(kPollInterval);
  }
  if (!options.check_health) return address;

  absl::Status health;
  while (true) {
    health = CheckServing(address, absl::Milliseconds(500));
    if (health.ok()) return address;
    if (absl::Status exited = exited_error(); !exited.ok()) return exited;
    if (absl::Now() > deadline) break;
    absl::SleepFor(kPollInterval);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("service ", name, " at ", address, " is not healthy: ", health.message(),
                   " (log: ", log_path, "); last lines:\n", LogTail(log_path)));
}

absl::Status ProcessSupervisor::CheckAlive() {
  absl::MutexLock lock(&mu_);
  for (const auto& child : children_) {
    if (child->exited) {
      return absl::UnavailableError(
          absl::StrCat("service ", child->spec.name, " ", DescribeExit(*child)));
    }
  }
  return absl::OkStatus();
}

std::vector<ChildExit> ProcessSupervisor::TakeExits() {
  absl::MutexLock lock(&mu_);
  std::vector<ChildExit> exits;
  exits.swap(exits_);
  return exits;
}

std::optional<ChildExit> ProcessSupervisor::WaitForExit(const std::string& name,
                                                        absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  Child* child = Find(name);
  if (child == nullptr) return std::nullopt;
  mu_.AwaitWithTimeout(absl::Condition(&child->observed), timeout);
  if (!child->observed) return std::nullopt;
  return ExitOf(*child);
}

void ProcessSupervisor::StopAll(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  // Children reaped before now are left alone: their group id may since have been reused.
  std::vector<Child*> running;
  for (const auto& child : children_) {
    if (child->exited) continue;
    running.push_back(child.get());
    // The whole group: a child that is a shell or launcher takes its own children along.
    kill(-child->pid, SIGTERM);
  }
  auto all_exited = [&running]() {
    for (Child* child : running) {
      if (!child->exited) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(absl::Condition(&all_exited), grace);
  for (Child* child : running) {
    kill(-child->pid, SIGKILL);  // stragglers, and anything left in the group
  }
  // The watchers reap them.
  mu_.Await(absl::Condition(&all_exited));
}

pid_t ProcessSupervisor::pid(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  for (const auto& child : children_) {
    if (child->spec.name == name) return child->pid;
  }
  return -1;
}

std::vector<std::string> ProcessSupervisor::names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& child : children_) names.push_back(child->spec.name);
  return names;
}

ChildExit ProcessSupervisor::ExitOf(const Child& child) {
  return ChildExit{child.spec.name, child.pid, child.wait_status, child.exit_time,
                   HowItEnded(child.wait_status)};
}

std::string ProcessSupervisor::DescribeExit(const Child& child) {
  return absl::StrCat(HowItEnded(child.wait_status), " (log: ", child.spec.log_path,
                      "); last lines:\n", LogTail(child.spec.log_path));
}

ProcessSupervisor::Child* ProcessSupervisor::Find(const std::string& name) {
  for (const auto& child : children_) {
    if (child->spec.name == name) return child.get();
  }
  return nullptr;
}

}  // namespace lockstep::orchestrator
