// The wire format between the sandbox library (sandbox.cc, the launcher) and the
// lockstep-sandbox-init binary (init_main.cc), which sets up the namespaces and runs the steps.
//
// Both directions are a sequence of records: a 4-byte type, a 4-byte payload length, the payload
// (native endianness: both ends are the same build on the same machine).
//
// Launcher -> init, on fd 3 (a sealed memfd, read whole): one kSandbox record, then the
// per-sandbox records, then for each step a kStep record followed by its kArgv and kEnv records.
// Strings inside a payload are NUL-terminated and concatenated. A warm init gets the root's
// records (kSandbox, binds, symlinks) on kRootSpecFd at its spawn and the run's (kSandbox again,
// files, seccomp, steps) with its run.
//
// Init -> launcher, on fd 4 (a pipe): kNsInitPid first (the host pid of the namespace's init,
// which the launcher kills to end the run; a warm init sends it before its run), then kStepDone per finished step, or one kError.
//
// Plain C++ with no library beyond libc: the init binary is linked statically and starts in
// well under a millisecond.
#ifndef LOCKSTEP_SANDBOX_LAUNCH_PROTOCOL_H_
#define LOCKSTEP_SANDBOX_LAUNCH_PROTOCOL_H_

#include <cstdint>

namespace lockstep::sandbox::protocol {

constexpr int kSpecFd = 3;
constexpr int kReportFd = 4;
// A warm init's root records (kSandbox, binds, symlinks), at its spawn; its kSpecFd is then a
// socket on which the run's descriptors arrive, the run's spec holding the run's records only.
constexpr int kRootSpecFd = 5;

enum RecordType : uint32_t {
  // Launcher -> init.
  kSandbox = 1,     // SandboxRecord
  kReadOnlyBind,    // "host path\0path inside\0": a read-only bind mount (file or directory)
  kDeviceBind,      // "host path\0path inside\0": a device node (/dev/null ...), writable
  kSymlink,         // "target\0path inside\0"
  kFile,            // FileRecord header, then "path inside /work\0", then the content
  kCgroupProcs,     // "path of a cgroup.procs file\0": the init joins it before anything else
  kSeccompFilter,   // struct sock_filter[]: installed in each step's process before execve
  kStep,            // StepRecord; the kArgv and kEnv records after it belong to it
  kArgv,            // "arg0\0arg1\0..."
  kEnv,             // "KEY=value\0..."
  // Init -> launcher.
  kNsInitPid = 100,  // int32_t: host pid of the namespace init
  kStepDone,         // StepDoneRecord, then up to kMaxCapturedOutput bytes of captured output
  kError,            // "what failed: strerror\0"
};

struct RecordHeader {
  uint32_t type;
  uint32_t length;
};

struct SandboxRecord {
  uint32_t outside_uid;       // the host uid the namespace's root maps to
  uint32_t outside_gid;
  uint64_t work_dir_bytes;    // size of the tmpfs mounted at /work (and bound at /tmp)
  uint64_t work_dir_inodes;
  uint32_t mount_proc;        // 1: mount a fresh /proc for the PID namespace
  uint32_t reserved;
};

struct FileRecord {
  uint32_t mode;  // e.g. 0644, 0755
  uint32_t path_length;  // bytes of the path, its NUL included
};

// Limits are those of the step's process tree; 0 means "no limit" for the optional ones.
struct StepRecord {
  uint64_t wall_ms;          // the init kills every process of the namespace past this
  uint64_t cpu_ms;           // RLIMIT_CPU (rounded up to whole seconds; SIGXCPU then SIGKILL)
  uint64_t address_space_bytes;  // RLIMIT_AS
  uint64_t max_processes;    // RLIMIT_NPROC (counted in the sandbox's own user namespace)
  uint64_t max_file_bytes;   // RLIMIT_FSIZE
  uint64_t max_open_files;   // RLIMIT_NOFILE
  uint32_t use_stdin;        // 1: the step reads the request's stdin; 0: /dev/null
  uint32_t capture_output;   // 1: stdout+stderr go to the kStepDone record (compile steps)
  uint32_t stop_on_failure;  // 1: a failed step ends the run (later steps are not started)
  uint32_t reserved;
};

constexpr uint32_t kMaxCapturedOutput = 64 << 10;

struct StepDoneRecord {
  uint32_t step_index;
  int32_t wait_status;      // as from wait4
  uint32_t timed_out;       // 1: the init killed the step at its wall-clock limit
  uint32_t captured_bytes;  // bytes of output following this header
  uint64_t wall_us;
  uint64_t user_cpu_us;
  uint64_t system_cpu_us;
  uint64_t max_rss_kb;      // largest resident set of any one process of the step
};

}  // namespace lockstep::sandbox::protocol

#endif  // LOCKSTEP_SANDBOX_LAUNCH_PROTOCOL_H_
