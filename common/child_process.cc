#include "common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace lockstep {
namespace {

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// The child's stdin and stdout/stderr, opened close-on-exec (dup2 clears the flag on the copy).
struct ChildFiles {
  int input = -1;   // /dev/null, or -1 to keep ours
  int output = -1;  // the output file, or -1 to keep ours
  ~ChildFiles() {
    if (input >= 0) close(input);
    if (output >= 0) close(output);
  }
};

absl::Status OpenChildFiles(const ChildProcessOptions& options, ChildFiles& files) {
  if (!options.output_path.empty()) {
    files.output =
        open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (files.output < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", options.output_path, " for ",
                                              options.argv[0], ": ", std::strerror(errno)));
    }
  }
  if (options.null_stdin) {
    files.input = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (files.input < 0) {
      return absl::InternalError(absl::StrCat("cannot open /dev/null: ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status ExecError(const std::string& program, int error) {
  return absl::FailedPreconditionError(absl::StrCat("exec ", program, ": ", std::strerror(error)));
}

// posix_spawnp with the options' files, process group and a clean signal state.
absl::StatusOr<pid_t> Spawn(const ChildProcessOptions& options, const ChildFiles& files,
                            char** argv, char** envp) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  if (files.input >= 0) posix_spawn_file_actions_adddup2(&actions, files.input, STDIN_FILENO);
  if (files.output >= 0) {
    posix_spawn_file_actions_adddup2(&actions, files.output, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, files.output, STDERR_FILENO);
  }
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal_number : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&defaults, signal_number);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (options.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  posix_spawnattr_setflags(&attributes, flags);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  pid_t pid = -1;
  // glibc's posix_spawn reports an exec failure as its return value (it uses CLONE_VFORK).
  const int error = posix_spawnp(&pid, argv[0], &actions, &attributes, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) return ExecError(options.argv[0], error);
  return pid;
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void ExecDyingWithParent(pid_t parent, bool own_group, const ChildFiles& files,
                                      int error_pipe, char** argv, char** envp) {
  if (own_group) setpgid(0, 0);
  // If the parent died between fork and prctl, the signal will never come: check it is still
  // the one that forked us.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(126);
  if (files.input >= 0) dup2(files.input, STDIN_FILENO);
  if (files.output >= 0) {
    dup2(files.output, STDOUT_FILENO);
    dup2(files.output, STDERR_FILENO);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  execvpe(argv[0], argv, envp);
  const int error = errno;
  const ssize_t ignored = write(error_pipe, &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

absl::StatusOr<pid_t> ForkDyingWithParent(const ChildProcessOptions& options,
                                          const ChildFiles& files, char** argv, char** envp) {
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    ExecDyingWithParent(parent, options.own_process_group, files, error_pipe[1], argv, envp);
  }
  const int fork_error = errno;
  close(error_pipe[1]);
  if (pid < 0) {
    close(error_pipe[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_error)));
  }
  // Also done in the child; whichever runs first wins the race.
  if (options.own_process_group) setpgid(pid, pid);
  // The pipe closes on a successful exec (close-on-exec) or carries exec's errno.
  int exec_error = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &exec_error, sizeof(exec_error));
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_error))) {
    int status = 0;
    waitpid(pid, &status, 0);
    return ExecError(options.argv[0], exec_error);
  }
  return pid;
}

}  // namespace

std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& [key, value] : overrides) replaced = replaced || key == name;
    if (!replaced) entries.push_back(std::move(text));
  }
  for (const auto& [key, value] : overrides) entries.push_back(absl::StrCat(key, "=", value));
  return entries;
}

absl::StatusOr<pid_t> StartChildProcess(const ChildProcessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("child process: empty argv");
  ChildFiles files;
  if (absl::Status s = OpenChildFiles(options, files); !s.ok()) return s;
  // Everything the child needs is built before it starts: a forked child may not allocate.
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<std::string> env_strings = ChildEnvironment(options.env);
  std::vector<char*> envp = Pointers(env_strings);
  if (options.die_with_parent) {
    return ForkDyingWithParent(options, files, argv.data(), envp.data());
  }
  return Spawn(options, files, argv.data(), envp.data());
}

absl::StatusOr<int> WaitForChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid ", pid, ": ", std::strerror(errno)));
    }
  }
  return status;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

absl::Status RunToCompletion(const std::vector<std::string>& argv, const std::string& output_path) {
  absl::StatusOr<pid_t> pid = StartChildProcess({.argv = argv, .output_path = output_path});
  if (!pid.ok()) {
    return absl::Status(pid.status().code(),
                        absl::StrCat("'", absl::StrJoin(argv, " "), "': ", pid.status().message()));
  }
  absl::StatusOr<int> status = WaitForChild(*pid);
  if (!status.ok()) return status.status();
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("'", absl::StrJoin(argv, " "), "' ",
                                          DescribeWaitStatus(*status), " (log: ", output_path,
                                          ")"));
}

}  // namespace lockstep
