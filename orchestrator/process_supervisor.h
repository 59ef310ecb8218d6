// Child processes of the orchestrator: the trainer, the generators and any reward or
// environment servers named by a command.
//
// Each child is started through common/child_process (its own process group, stdout and stderr
// appended to a log file, SIGTERM from the kernel when the thread that started it exits, even
// by SIGKILL — so a job never leaves a service behind). A watcher thread per child blocks in
// waitpid: a child is reaped the moment it dies (never a zombie), its exit is queued for
// TakeExits and handed to the exit observer at once, on the watcher thread.
//
// The supervisor waits until a child prints its "serving on HOST:PORT" line (every
// `lockstep serve …` command prints "lockstep <what> serving on HOST:PORT") and the gRPC
// health service answers SERVING; a child that exits first is an error naming it, its exit
// status, its log file and the log's last lines. A dead child may be started again under the
// same name (Restart). StopAll (also run by the destructor) sends SIGTERM to each group, waits
// a grace period, then SIGKILL; the exits of a stop are not queued or observed.
//
//   ProcessSupervisor supervisor;
//   supervisor.SetExitObserver([](const ChildExit& e) { Log(e.description); });
//   supervisor.Start({.name = "trainer", .argv = {"build/lockstep", "serve", "trainer",
//                     "--port", "0"}, .log_path = "runs/x/logs/trainer.log"});
//   absl::StatusOr<std::string> address = supervisor.WaitUntilServing("trainer");
//   ... for (const ChildExit& exit : supervisor.TakeExits()) restart or stop ...
//
// Thread safety: all methods may be called from any thread. PR_SET_PDEATHSIG fires when the
// *thread* that started a child exits, so call Start and Restart from a thread that lives as
// long as the job (the main thread).
#ifndef LOCKSTEP_ORCHESTRATOR_PROCESS_SUPERVISOR_H_
#define LOCKSTEP_ORCHESTRATOR_PROCESS_SUPERVISOR_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep::orchestrator {

struct ChildSpec {
  std::string name;               // unique per supervisor: "trainer", "generator0", …
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) ours
  std::string log_path;                                  // stdout + stderr, appended; required
};

// How WaitUntilServing decides that a child is ready.
struct ReadyOptions {
  absl::Duration timeout = absl::Seconds(120);
  bool check_health = true;  // after the log line, poll grpc.health.v1 until SERVING
};

// A child that died (not by StopAll).
struct ChildExit {
  std::string name;
  pid_t pid = -1;
  int wait_status = 0;  // a waitpid status; -1 when unknown
  absl::Time time;      // when it was reaped
  // "was killed by signal 9 (Killed)" / "exited with status 3".
  std::string how;
};

// The last `max_lines` lines of the file at `path` ("" when it cannot be read).
std::string LogTail(const std::string& path, int max_lines = 20);

class ProcessSupervisor {
 public:
  ProcessSupervisor() = default;
  ~ProcessSupervisor();  // StopAll(), then joins the watcher threads
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Called on a watcher thread for every exit that TakeExits will report, as it happens. Must
  // be quick and must not call back into the supervisor. Set before the first Start.
  void SetExitObserver(std::function<void(const ChildExit&)> observer);

  // Starts a child; returns its pid once it has exec'd. InvalidArgument for an empty or
  // duplicate name, empty argv or no log path; Internal naming the log file when it cannot be
  // opened; FailedPrecondition "cannot start NAME: exec ARGV0: <reason>" when exec fails.
  absl::StatusOr<pid_t> Start(const ChildSpec& spec);

  // Starts the dead child `name` again from its spec, with `argv` instead of the spec's when
  // non-empty (kept for later restarts); its log is appended to, WaitUntilServing reads only
  // what the new process writes. NotFound for an unknown name, FailedPrecondition while it still
  // runs, else as Start.
  absl::StatusOr<pid_t> Restart(const std::string& name, std::vector<std::string> argv = {});

  // Waits until child `name` has printed "serving on HOST:PORT" (in what it wrote since it was
  // last started) and, with options.check_health, the health service there answers SERVING.
  // Returns "HOST:PORT". Unavailable when the child exits first, DeadlineExceeded on timeout;
  // both name the child and its log file and quote the log's last lines. NotFound for an
  // unknown name. A zero options.timeout looks once (DeadlineExceeded: not serving yet).
  absl::StatusOr<std::string> WaitUntilServing(const std::string& name,
                                               const ReadyOptions& options = {});

  // OK while every child runs; otherwise Unavailable for the first child found dead:
  // "service NAME exited with status N (log: PATH); last lines: …".
  absl::Status CheckAlive();

  // The exits since the last call, oldest first (each is reported once).
  std::vector<ChildExit> TakeExits();

  // Waits up to `timeout` for child `name` to be dead and its exit handed to the observer (so an
  // exit returned here has been observed and queued); returns its exit, or nullopt if it still
  // runs (or is unknown).
  std::optional<ChildExit> WaitForExit(const std::string& name, absl::Duration timeout);

  // SIGTERM to every child's process group, up to `grace` for them to exit, then SIGKILL;
  // every child is reaped. Safe to call more than once.
  void StopAll(absl::Duration grace = absl::Seconds(5));

  // Pid of child `name` (its latest process), or -1.
  pid_t pid(const std::string& name) const;

  // Names of the children started, in start order.
  std::vector<std::string> names() const;

 private:
  struct Child {
    ChildSpec spec;
    pid_t pid = -1;
    off_t log_offset = 0;  // log size at start: earlier lines belong to an earlier process
    bool exited = false;
    bool observed = false;  // exited, and the observer has returned (or a stop skipped it)
    int wait_status = 0;
    absl::Time exit_time;
  };

  // Spawns `child.spec` into `child` (pid, log offset, a watcher thread). Requires mu_.
  absl::Status Spawn(Child& child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watcher of `pid`: reaps it and records the exit.
  void Watch(std::string name, pid_t pid);
  static ChildExit ExitOf(const Child& child);
  static std::string DescribeExit(const Child& child);
  Child* Find(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Child>> children_ ABSL_GUARDED_BY(mu_);
  std::vector<ChildExit> exits_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(const ChildExit&)> observer_;
  std::vector<std::thread> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_PROCESS_SUPERVISOR_H_
