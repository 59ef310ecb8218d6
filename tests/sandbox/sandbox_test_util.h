// What the sandbox tests share: one real Sandbox per configuration (with the machine's cgroups,
// and with cgroups turned off, so that the rlimit fallback is proven too), request builders,
// and checks that nothing of a run is left on the host.
#ifndef LOCKSTEP_TESTS_SANDBOX_SANDBOX_TEST_UTIL_H_
#define LOCKSTEP_TESTS_SANDBOX_SANDBOX_TEST_UTIL_H_

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "sandbox/sandbox.h"

namespace lockstep::sandbox::testing {

// The sandbox with cgroups as the machine allows (`use_cgroups`) or turned off. Created once per
// process, thread-safely (tests call it from several threads at once); the test fails (not
// skips) if the kernel refuses the sandbox.
inline std::unique_ptr<Sandbox> CreateSandboxOrAbort(SandboxOptions options) {
  absl::StatusOr<std::unique_ptr<Sandbox>> created = Sandbox::Create(std::move(options));
  if (!created.ok()) {
    ADD_FAILURE() << created.status();
    std::abort();
  }
  return *std::move(created);
}

inline std::unique_ptr<Sandbox> CreateSandboxOrAbort(bool use_cgroups) {
  SandboxOptions options;
  options.use_cgroups = use_cgroups;
  return CreateSandboxOrAbort(std::move(options));
}

inline Sandbox& SharedSandbox(bool use_cgroups) {
  if (use_cgroups) {
    static Sandbox* const with_cgroups = CreateSandboxOrAbort(true).release();
    return *with_cgroups;
  }
  static Sandbox* const without_cgroups = CreateSandboxOrAbort(false).release();
  return *without_cgroups;
}

inline ExecRequest Python(const std::string& source, ExecLimits limits = {}) {
  ExecRequest request;
  request.language = "python3";
  request.source = source;
  request.limits = limits;
  return request;
}

inline std::string ReadHostFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline bool HostPathExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// Whether host pid `pid` is a warm init's namespace init (waiting for its run, or ending): pid 1
// of its own PID namespace (NSpid ends in 1) whose parent is a warm init. No process of a
// finished run can be that: a run's PID namespace ends with its pid 1, and Run returns only once
// that one is dead (its outer init, which reaps it, exits a moment later).
inline bool IsWarmNamespaceInit(const std::string& pid) {
  std::istringstream status(ReadHostFile("/proc/" + pid + "/status"));
  std::string parent;
  bool pid_one = false;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("PPid:", 0) == 0) parent = line.substr(line.find_first_not_of(" \t", 5));
    if (line.rfind("NSpid:", 0) == 0) {
      pid_one = line.size() > 8 && line.compare(line.size() - 2, 2, "\t1") == 0;
    }
  }
  if (!pid_one || parent.empty()) return false;
  const std::string cmdline = ReadHostFile("/proc/" + parent + "/cmdline");
  return cmdline.rfind(std::string("lockstep-sandbox-init\0--warm", 28), 0) == 0;
}

inline int ParentPid(const std::string& pid) {
  std::istringstream status(ReadHostFile("/proc/" + pid + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("PPid:", 0) == 0) return std::atoi(line.c_str() + 5);
  }
  return 0;
}

// Whether host pid `pid` belongs to a sandbox run of another process of this machine (another
// session's tests or job): its topmost lockstep-sandbox-init ancestor was started by a live
// process other than this one. A process with no such ancestor, or whose topmost init is an
// orphan of the machine's init, is not another's: it counts as left behind.
inline bool IsAnotherProcessRun(const std::string& pid) {
  int outer = 0;
  for (int current = std::atoi(pid.c_str()), depth = 0; depth < 64; ++depth) {
    const int parent = ParentPid(std::to_string(current));
    if (parent <= 1 || parent == getpid()) break;
    if (ReadHostFile("/proc/" + std::to_string(parent) + "/cmdline")
            .rfind("lockstep-sandbox-init", 0) == 0) {
      outer = parent;
    }
    current = parent;
  }
  if (outer == 0) return false;
  const int launcher = ParentPid(std::to_string(outer));
  return launcher > 1 && launcher != getpid();
}

inline bool IsExiting(int pid) {
  std::istringstream status(ReadHostFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("State:", 0) == 0) {
      return line.find_first_of("ZX", 6) != std::string::npos;
    }
  }
  return true;  // gone already
}

// Whether host pid `pid` descends from this process (a run of this process's sandbox) through
// ancestors that are all alive: not a namespace being torn down.
inline bool DescendsFromUsThroughLiveAncestors(int pid) {
  for (int current = pid, depth = 0; depth < 64; ++depth) {
    const int parent = ParentPid(std::to_string(current));
    if (parent == getpid()) return true;
    if (parent <= 1 || IsExiting(parent)) return false;
    current = parent;
  }
  return false;
}

// One pass over /proc: host pids of live processes that run as `uid` in a PID namespace other
// than ours, warm namespace inits and other processes' runs aside.
inline std::vector<int> ForeignNamespaceProcessesNow(uint32_t uid) {
  char own[64] = {};
  readlink("/proc/self/ns/pid", own, sizeof(own) - 1);
  std::vector<int> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = readdir(proc)) {
    const int pid = atoi(entry->d_name);
    if (pid <= 0) continue;
    const std::string base = "/proc/" + std::string(entry->d_name);
    struct stat st;
    if (stat(base.c_str(), &st) != 0 || st.st_uid != uid) continue;
    char ns[64] = {};
    if (readlink((base + "/ns/pid").c_str(), ns, sizeof(ns) - 1) <= 0) continue;
    // A zombie is dead and holds nothing: a finished run's pid 1 is one until its outer init,
    // which Run does not wait for, reaps it (the kernel emptied its namespace before).
    if (std::string(ns) != own && !IsExiting(pid) && !IsWarmNamespaceInit(entry->d_name) &&
        !IsAnotherProcessRun(entry->d_name)) {
      pids.push_back(pid);
    }
  }
  closedir(proc);
  return pids;
}

// Host pids of processes that run as `uid` in a PID namespace other than ours: processes of a
// sandbox run (no other process of this machine lives there as the sandbox's uid), warm
// namespace inits (waiting for a run, or ending) and other processes' runs aside.
//
// A process that descends from this one through live ancestors is reported at once: a finished
// run leaves nothing, not even for a moment. Any other is reported only if it is still there 10 s
// later: another process's run being torn down has a zombie namespace init above it (its
// command line reads empty, so IsAnotherProcessRun cannot name the launcher), and an orphaned
// warm init of a process that just exited hangs under the machine's init until its namespace is
// reaped (so does one of this process's retired warm inits). These go within milliseconds;
// something a run left behind does not. (CI ran the suite
// next to other tests' sandboxes and saw such a process after a run here, stop 31.)
inline std::vector<int> ForeignNamespaceProcesses(uint32_t uid) {
  std::vector<int> ours;
  std::vector<int> unknown;
  for (int pid : ForeignNamespaceProcessesNow(uid)) {
    (DescendsFromUsThroughLiveAncestors(pid) ? ours : unknown).push_back(pid);
  }
  for (int waited_ms = 0; !unknown.empty() && waited_ms < 10000; waited_ms += 20) {
    usleep(20 * 1000);
    const std::vector<int> now = ForeignNamespaceProcessesNow(uid);
    std::vector<int> still;
    for (int pid : unknown) {
      if (std::find(now.begin(), now.end(), pid) != now.end()) still.push_back(pid);
    }
    unknown = std::move(still);
  }
  ours.insert(ours.end(), unknown.begin(), unknown.end());
  return ours;
}

// Host pids whose command line contains `needle`.
inline std::vector<int> ProcessesWithArgument(const std::string& needle) {
  std::vector<int> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = readdir(proc)) {
    const int pid = atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmdline = ReadHostFile("/proc/" + std::string(entry->d_name) + "/cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(needle) != std::string::npos) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

// The sandbox still works after whatever ran before: a trivial program runs and prints.
inline void ExpectNextRunWorks(Sandbox& sandbox) {
  absl::StatusOr<ExecResult> result = sandbox.Run(Python("print('next run ok')"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->verdict, Verdict::kOk) << result->stderr_data << result->error;
  EXPECT_EQ(result->stdout_data, "next run ok\n");
  EXPECT_TRUE(ForeignNamespaceProcesses(sandbox.isolation().outside_uid).empty());
}

}  // namespace lockstep::sandbox::testing

#endif  // LOCKSTEP_TESTS_SANDBOX_SANDBOX_TEST_UTIL_H_
