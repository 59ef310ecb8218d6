#include "orchestrator/process_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/service_health.h"

extern char** environ;

namespace lockstep::orchestrator {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// The environment of a child: ours, with `additions` added or replacing same-named entries.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& additions) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    std::string name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& [key, value] : additions) replaced = replaced || key == name;
    if (!replaced) entries.push_back(std::move(text));
  }
  for (const auto& [key, value] : additions) entries.push_back(absl::StrCat(key, "=", value));
  return entries;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(pid_t parent, int log_fd, int null_fd, int error_pipe, char** argv,
                            char** envp) {
  setpgid(0, 0);
  // Die with the orchestrator. If it already died between fork and prctl, the signal will
  // never come: check the parent is still the one that forked us.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(126);

  dup2(null_fd, STDIN_FILENO);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  // A clean signal state: the orchestrator may block or ignore signals its children need.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);

  execvpe(argv[0], argv, envp);
  int error = errno;
  ssize_t ignored = write(error_pipe, &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

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

ProcessSupervisor::~ProcessSupervisor() { StopAll(); }

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

  int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open log file ", spec.log_path, " for ",
                                            spec.name, ": ", std::strerror(errno)));
  }
  struct stat log_stat;
  off_t log_offset = fstat(log_fd, &log_stat) == 0 ? log_stat.st_size : 0;
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int error_pipe[2];
  if (null_fd < 0 || pipe2(error_pipe, O_CLOEXEC) != 0) {
    int error = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::InternalError(
        absl::StrCat("cannot start ", spec.name, ": ", std::strerror(error)));
  }

  // Everything the child needs is built before fork: it may not allocate afterwards.
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<std::string> env_strings = ChildEnvironment(spec.env);
  std::vector<char*> envp = Pointers(env_strings);
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid == 0) ExecChild(parent, log_fd, null_fd, error_pipe[1], argv.data(), envp.data());
  int fork_error = errno;
  close(log_fd);
  close(null_fd);
  close(error_pipe[1]);
  if (pid < 0) {
    close(error_pipe[0]);
    return absl::InternalError(
        absl::StrCat("cannot start ", spec.name, ": fork: ", std::strerror(fork_error)));
  }
  setpgid(pid, pid);  // also done in the child; whichever runs first wins the race

  // The pipe closes on a successful exec (CLOEXEC) or carries exec's errno.
  int exec_error = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &exec_error, sizeof(exec_error));
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_error))) {
    int status = 0;
    waitpid(pid, &status, 0);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot start ", spec.name, ": exec ", spec.argv[0], ": ", std::strerror(exec_error)));
  }

  Child child;
  child.spec = spec;
  child.pid = pid;
  child.log_offset = log_offset;
  children_.push_back(std::move(child));
  return pid;
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
    PollExit(*child);
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
  for (Child& child : children_) {
    PollExit(child);
    if (child.exited) {
      return absl::UnavailableError(
          absl::StrCat("service ", child.spec.name, " ", DescribeExit(child)));
    }
  }
  return absl::OkStatus();
}

void ProcessSupervisor::StopAll(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  // Children reaped before now are left alone: their group id may since have been reused.
  std::vector<Child*> running;
  for (Child& child : children_) {
    PollExit(child);
    if (child.exited) continue;
    running.push_back(&child);
    // The whole group: a child that is a shell or launcher takes its own children along.
    kill(-child.pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  while (true) {
    bool all_exited = true;
    for (Child* child : running) {
      PollExit(*child);
      all_exited = all_exited && child->exited;
    }
    if (all_exited || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (Child* child : running) {
    kill(-child->pid, SIGKILL);  // stragglers, and anything left in the group
    if (!child->exited) {
      int status = 0;
      while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
      }
      child->exited = true;
      child->wait_status = status;
    }
  }
}

pid_t ProcessSupervisor::pid(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  for (const Child& child : children_) {
    if (child.spec.name == name) return child.pid;
  }
  return -1;
}

std::vector<std::string> ProcessSupervisor::names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const Child& child : children_) names.push_back(child.spec.name);
  return names;
}

void ProcessSupervisor::PollExit(Child& child) {
  if (child.exited) return;
  int status = 0;
  pid_t result = waitpid(child.pid, &status, WNOHANG);
  if (result == child.pid) {
    child.exited = true;
    child.wait_status = status;
  } else if (result < 0 && errno == ECHILD) {
    child.exited = true;  // reaped elsewhere; the status is unknown
    child.wait_status = -1;
  }
}

std::string ProcessSupervisor::DescribeExit(const Child& child) {
  std::string how;
  if (child.wait_status == -1) {
    how = "exited (status unknown)";
  } else if (WIFEXITED(child.wait_status)) {
    how = absl::StrCat("exited with status ", WEXITSTATUS(child.wait_status));
  } else if (WIFSIGNALED(child.wait_status)) {
    how = absl::StrCat("was killed by signal ", WTERMSIG(child.wait_status), " (",
                       strsignal(WTERMSIG(child.wait_status)), ")");
  } else {
    how = "stopped";
  }
  return absl::StrCat(how, " (log: ", child.spec.log_path, "); last lines:\n",
                      LogTail(child.spec.log_path));
}

ProcessSupervisor::Child* ProcessSupervisor::Find(const std::string& name) {
  for (Child& child : children_) {
    if (child.spec.name == name) return &child;
  }
  return nullptr;
}

}  // namespace lockstep::orchestrator
