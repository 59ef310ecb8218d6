// Child processes of the orchestrator: the trainer, the generators and any reward or
// environment servers named by a command.
//
// Each child runs in its own process group with stdout and stderr appended to a log file, and
// is told by the kernel to die (SIGTERM, PR_SET_PDEATHSIG) when the orchestrator dies, even by
// SIGKILL — so a job never leaves a service behind. The supervisor waits until a child prints
// its "serving on HOST:PORT" line (every `lockstep serve …` command prints
// "lockstep <what> serving on HOST:PORT") and the gRPC health service answers SERVING; a child
// that exits first is an error naming it, its exit status, its log file and the log's last
// lines. StopAll (also run by the destructor) sends SIGTERM to each group, waits a grace period,
// then SIGKILL, and reaps.
//
//   ProcessSupervisor supervisor;
//   supervisor.Start({.name = "trainer", .argv = {"build/lockstep", "serve", "trainer",
//                     "--port", "0"}, .log_path = "runs/x/logs/trainer.log"});
//   absl::StatusOr<std::string> address = supervisor.WaitUntilServing("trainer",
//   absl::Seconds(60));
//   ... every loop iteration: if (!supervisor.CheckAlive().ok()) stop ...
//
// Thread safety: all methods may be called from any thread. PR_SET_PDEATHSIG fires when the
// *thread* that forked exits, so call Start from a thread that lives as long as the job (the
// main thread).
#ifndef LOCKSTEP_ORCHESTRATOR_PROCESS_SUPERVISOR_H_
#define LOCKSTEP_ORCHESTRATOR_PROCESS_SUPERVISOR_H_

#include <sys/types.h>

#include <string>
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

// The last `max_lines` lines of the file at `path` ("" when it cannot be read).
std::string LogTail(const std::string& path, int max_lines = 20);

class ProcessSupervisor {
 public:
  ProcessSupervisor() = default;
  ~ProcessSupervisor();  // StopAll()
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts a child; returns its pid once it has exec'd. InvalidArgument for an empty or
  // duplicate name, empty argv or no log path; Internal naming the log file when it cannot be
  // opened; FailedPrecondition "cannot start NAME: exec ARGV0: <reason>" when exec fails.
  absl::StatusOr<pid_t> Start(const ChildSpec& spec);

  // Waits until child `name` has printed "serving on HOST:PORT" (in what it wrote since Start)
  // and, with options.check_health, the health service there answers SERVING. Returns
  // "HOST:PORT". Unavailable when the child exits first, DeadlineExceeded on timeout; both
  // name the child and its log file and quote the log's last lines. NotFound for an unknown
  // name.
  absl::StatusOr<std::string> WaitUntilServing(const std::string& name,
                                               const ReadyOptions& options = {});

  // OK while every child runs; otherwise Unavailable for the first child found dead:
  // "service NAME exited with status N (log: PATH); last lines: …".
  absl::Status CheckAlive();

  // SIGTERM to every child's process group, up to `grace` for them to exit, then SIGKILL;
  // every child is reaped. Safe to call more than once.
  void StopAll(absl::Duration grace = absl::Seconds(5));

  // Pid of child `name`, or -1.
  pid_t pid(const std::string& name) const;

  // Names of the children started, in start order.
  std::vector<std::string> names() const;

 private:
  struct Child {
    ChildSpec spec;
    pid_t pid = -1;
    off_t log_offset = 0;  // log size at start: earlier lines belong to an earlier run
    bool exited = false;
    int wait_status = 0;
  };

  // Reaps `child` if it has exited (non-blocking). Requires mu_.
  void PollExit(Child& child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string DescribeExit(const Child& child);
  Child* Find(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_PROCESS_SUPERVISOR_H_
