// lockstep-sandbox-init: the process the sandbox library spawns for every run. It reads the
// run's spec (launch_protocol.h) from fd 3, enters fresh user, mount, network, IPC, UTS, cgroup
// and PID namespaces, forks the PID namespace's init, and that init builds a minimal read-only
// root, runs each step under rlimits, dropped capabilities and the seccomp filter, enforces each
// step's wall-clock limit, and reports on fd 4. A warm init (`--warm`, spawned ahead by the
// pool) does all but the run's own part (its /work tmpfs, files and steps) before its run is
// known, and then waits for the run.
//
// Process tree of one run (host view):
//   launcher (the library's caller)
//    └─ outer: this binary; joins the cgroups, drops to the sandbox uid, unshares namespaces,
//       │       reports the ns init's host pid, waits for it
//       └─ ns init (pid 1 in the new PID namespace; cloned with CLONE_VM, so it shares the
//          │       outer's memory): builds the root, mounts /work, writes files, runs steps, reaps
//           └─ step process (execve of the program; capability-less, seccomp-filtered)
// When the ns init exits (normally, or SIGKILLed by the launcher) the kernel kills every other
// process of the namespace and waits for them, so nothing outlives a run.
//
// Only libc is used (the binary links statically); errors are reported as one kError record and
// exit status 1.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <linux/securebits.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/init_spec.h"
#include "sandbox/launch_protocol.h"

namespace {

namespace protocol = lockstep::sandbox::protocol;
using namespace lockstep::sandbox::init;  // NOLINT: the init's one spec and its report

constexpr const char* kNewRoot = "/tmp";  // mount point of the new root's tmpfs (our mount ns)

void WriteFileAt(const char* path, const char* content) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) Die("open", path);
  WriteAll(fd, content, strlen(content));
  close(fd);
}

// mkdir -p of `path` (absolute) and its parents, mode 0755.
void MakeDirs(const char* path) {
  char buffer[4096];
  snprintf(buffer, sizeof(buffer), "%s", path);
  for (char* p = buffer + 1; *p != '\0'; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buffer, 0755) != 0 && errno != EEXIST) Die("mkdir", buffer);
    *p = '/';
  }
  if (mkdir(buffer, 0755) != 0 && errno != EEXIST) Die("mkdir", buffer);
}

void ParentDirs(const char* path) {
  char buffer[4096];
  snprintf(buffer, sizeof(buffer), "%s", path);
  char* slash = strrchr(buffer, '/');
  if (slash != nullptr && slash != buffer) {
    *slash = '\0';
    MakeDirs(buffer);
  }
}

// Flags a bind remount must keep: a user namespace may not clear the flags of the mount it copies.
unsigned long LockedFlags(const char* path) {
  struct statvfs vfs;
  if (statvfs(path, &vfs) != 0) return 0;
  unsigned long flags = 0;
  if (vfs.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (vfs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (vfs.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (vfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (vfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (vfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

void BindInto(const Bind& bind) {
  char target[4096];
  snprintf(target, sizeof(target), "%s%s", kNewRoot, bind.target);
  struct stat st;
  if (stat(bind.source, &st) != 0) Die("stat", bind.source);
  if (S_ISDIR(st.st_mode)) {
    MakeDirs(target);
  } else {
    ParentDirs(target);
    int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) Die("create mount point", target);
    close(fd);
  }
  if (mount(bind.source, target, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    Die("bind mount", bind.source);
  }
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | LockedFlags(bind.source);
  if (!bind.device) flags |= MS_RDONLY | MS_NODEV;
  if (mount(nullptr, target, nullptr, flags, nullptr) != 0) Die("remount read-only", target);
}

void BuildRoot() {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Die("make / private");
  if (mount("tmpfs", kNewRoot, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,nr_inodes=4096,mode=0755") !=
      0) {
    Die("mount root tmpfs");
  }
  for (int i = 0; i < spec.num_binds; ++i) BindInto(spec.binds[i]);
  char path[4096];
  for (int i = 0; i < spec.num_links; ++i) {
    snprintf(path, sizeof(path), "%s%s", kNewRoot, spec.links[i].path);
    ParentDirs(path);
    if (symlink(spec.links[i].target, path) != 0 && errno != EEXIST) Die("symlink", path);
  }

  // Mount points of the run's working directory (MountWork), made while the root is writable.
  snprintf(path, sizeof(path), "%s/work", kNewRoot);
  MakeDirs(path);
  snprintf(path, sizeof(path), "%s/tmp", kNewRoot);
  MakeDirs(path);

  if (spec.sandbox.mount_proc) {
    snprintf(path, sizeof(path), "%s/proc", kNewRoot);
    MakeDirs(path);
    // A fresh procfs shows only this PID namespace. Some kernels refuse it in a user namespace
    // (a host /proc with masked paths); the run goes on without /proc then.
    mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  }

  if (chdir(kNewRoot) != 0) Die("chdir new root");
  if (syscall(SYS_pivot_root, ".", ".") != 0) Die("pivot_root");
  if (umount2(".", MNT_DETACH) != 0) Die("detach old root");
  if (chdir("/") != 0) Die("chdir /");
  if (mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    Die("remount / read-only");
  }
  sethostname("sandbox", 7);
}

// The run's own part of the root: /work, a private size-capped tmpfs (also at /tmp) holding
// the run's files, as the working directory.
void MountWork() {
  char options[128];
  snprintf(options, sizeof(options), "size=%llu,nr_inodes=%llu,mode=0755",
           static_cast<unsigned long long>(spec.sandbox.work_dir_bytes),
           static_cast<unsigned long long>(spec.sandbox.work_dir_inodes));
  if (mount("tmpfs", "/work", "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) Die("mount /work");
  if (mount("/work", "/tmp", nullptr, MS_BIND, nullptr) != 0) Die("bind /tmp");
  char path[4096];
  for (int i = 0; i < spec.num_files; ++i) {
    const File& file = spec.files[i];
    snprintf(path, sizeof(path), "/work/%s", file.path);
    ParentDirs(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, file.mode);
    if (fd < 0) Die("create", file.path);
    WriteAll(fd, file.content, file.size);
    fchmod(fd, file.mode);
    close(fd);
  }
  if (chdir("/work") != 0) Die("chdir /work");
}

void SetLimit(int resource, uint64_t soft, uint64_t hard, const char* name) {
  struct rlimit limit = {static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)};
  if (setrlimit(resource, &limit) != 0) Die("setrlimit", name);
}

// In the step's process, after fork: limits, no capabilities, seccomp, execve. Never returns.
[[noreturn]] void ExecStep(const Step& step, int capture_fd) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  if (!step.limits.use_stdin) {
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, 0) < 0) Die("stdin from /dev/null");
  }
  if (capture_fd >= 0 && (dup2(capture_fd, 1) < 0 || dup2(capture_fd, 2) < 0)) {
    Die("capture output");
  }
  // Every descriptor above stdio closes at execve; the report pipe stays usable until then.
  if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) Die("close_range");

  const protocol::StepRecord& l = step.limits;
  const uint64_t cpu_seconds = (l.cpu_ms + 999) / 1000;
  SetLimit(RLIMIT_CPU, cpu_seconds, cpu_seconds + 1, "RLIMIT_CPU");
  SetLimit(RLIMIT_AS, l.address_space_bytes, l.address_space_bytes, "RLIMIT_AS");
  // The outer process and the ns init run as the same uid in this user namespace.
  SetLimit(RLIMIT_NPROC, l.max_processes + 2, l.max_processes + 2, "RLIMIT_NPROC");
  SetLimit(RLIMIT_FSIZE, l.max_file_bytes, l.max_file_bytes, "RLIMIT_FSIZE");
  SetLimit(RLIMIT_NOFILE, l.max_open_files, l.max_open_files, "RLIMIT_NOFILE");
  SetLimit(RLIMIT_CORE, 0, 0, "RLIMIT_CORE");
  SetLimit(RLIMIT_MEMLOCK, 0, 0, "RLIMIT_MEMLOCK");
  SetLimit(RLIMIT_MSGQUEUE, 0, 0, "RLIMIT_MSGQUEUE");

  // No capabilities, now or after execve (root of a user namespace would regain them at exec
  // without SECBIT_NOROOT and an empty bounding set).
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                   SECBIT_NO_CAP_AMBIENT_RAISE |
                                   SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) != 0) {
    Die("set securebits");
  }
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) Die("drop bounding cap");
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &header, data) != 0) Die("clear capabilities");

  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Die("no_new_privs");
  if (spec.seccomp.len > 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &spec.seccomp) != 0) {
    Die("install seccomp filter");
  }
  execve(step.argv[0], const_cast<char* const*>(step.argv), const_cast<char* const*>(step.env));
  Die("execve", step.argv[0]);
}

uint64_t NowMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

uint64_t Micros(const timeval& tv) {
  return static_cast<uint64_t>(tv.tv_sec) * 1000000u + static_cast<uint64_t>(tv.tv_usec);
}

// Runs one step to its end or its wall-clock limit; reaps every process that ends meanwhile
// (orphans reparent to us). Returns true if it succeeded (exit status 0, in time).
bool RunStep(int index) {
  const Step& step = spec.steps[index];
  int capture_fd = -1;
  if (step.limits.capture_output) {
    capture_fd = static_cast<int>(syscall(SYS_memfd_create, "step-output", MFD_CLOEXEC));
    if (capture_fd < 0) Die("memfd for captured output");
  }
  const uint64_t start = NowMicros();
  // vfork: the step borrows this process's memory until its execve (or _exit), so no page
  // tables are copied and no copy-on-write faults follow (bench/sandbox: its CPU per run).
  // ExecStep changes only the step's own state (descriptors, limits, credentials, seccomp: all
  // per task) and never returns.
  const pid_t pid = vfork();
  if (pid < 0) Die("vfork step");
  if (pid == 0) ExecStep(step, capture_fd);

  protocol::StepDoneRecord done = {};
  done.step_index = static_cast<uint32_t>(index);
  const uint64_t deadline = start + step.limits.wall_ms * 1000u;
  sigset_t child_signal;
  sigemptyset(&child_signal);
  sigaddset(&child_signal, SIGCHLD);
  bool finished = false;
  while (!finished) {
    int status = 0;
    struct rusage usage;
    pid_t reaped;
    while ((reaped = wait4(-1, &status, WNOHANG, &usage)) > 0) {
      if (reaped != pid) continue;  // an orphan of this step
      finished = true;
      done.wait_status = status;
      done.user_cpu_us = Micros(usage.ru_utime);
      done.system_cpu_us = Micros(usage.ru_stime);
      done.max_rss_kb = static_cast<uint64_t>(usage.ru_maxrss);
    }
    if (finished) break;
    const uint64_t now = NowMicros();
    if (now >= deadline) {
      done.timed_out = 1;
      kill(-1, SIGKILL);  // every process of the namespace but this one
      if (wait4(pid, &status, 0, &usage) == pid) {
        done.wait_status = status;
        done.user_cpu_us = Micros(usage.ru_utime);
        done.system_cpu_us = Micros(usage.ru_stime);
        done.max_rss_kb = static_cast<uint64_t>(usage.ru_maxrss);
      }
      break;
    }
    const uint64_t wait_us = deadline - now;
    timespec timeout = {static_cast<time_t>(wait_us / 1000000u),
                        static_cast<long>((wait_us % 1000000u) * 1000u)};
    sigtimedwait(&child_signal, nullptr, &timeout);
  }
  done.wall_us = NowMicros() - start;

  // Whatever the step left behind (daemons, stragglers) does not run into the next step.
  kill(-1, SIGKILL);
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }

  static char captured[protocol::kMaxCapturedOutput];
  if (capture_fd >= 0) {
    ssize_t n = pread(capture_fd, captured, sizeof(captured), 0);
    done.captured_bytes = n > 0 ? static_cast<uint32_t>(n) : 0;
    close(capture_fd);
  }
  Report(protocol::kStepDone, &done, sizeof(done), captured, done.captured_bytes);
  return !done.timed_out && WIFEXITED(done.wait_status) && WEXITSTATUS(done.wait_status) == 0;
}

void ReceiveRun();

// Pid 1 of the run's PID namespace. `warm`: the run is not known yet; the root is built first
// and the run's descriptors and records are awaited on kSpecFd (ReceiveRun).
[[noreturn]] void NamespaceInit(int release_fd, bool warm) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  char byte;
  while (read(release_fd, &byte, 1) < 0 && errno == EINTR) {
  }
  close(release_fd);
  sigset_t child_signal;
  sigemptyset(&child_signal);
  sigaddset(&child_signal, SIGCHLD);
  sigprocmask(SIG_BLOCK, &child_signal, nullptr);

  BuildRoot();
  // Nothing in the namespace may read or write this process's memory (/proc/1/mem, environ).
  prctl(PR_SET_DUMPABLE, 0);
  if (warm) ReceiveRun();
  MountWork();
  for (int i = 0; i < spec.num_steps; ++i) {
    if (!RunStep(i) && spec.steps[i].limits.stop_on_failure) break;
  }
  _exit(0);
}

// Whether this thread's network namespace holds no socket ("sockets: used 0" in its sockstat,
// which counts every socket of the namespace but the kernel's own). Read from the host's /proc,
// before the mount namespace is ours.
bool NetNamespaceIsEmpty() {
  int fd = open("/proc/thread-self/net/sockstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[64] = {};
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  return n > 0 && strncmp(text, "sockets: used 0\n", 16) == 0;
}

// `net_fd` (>= 0): a network namespace of the host's root, lent to this run alone by the
// launcher's pool (net_namespace_pool.h); joined while this process is still root. Owned by the
// initial user namespace, it gives the sandbox's uid no power over it (no sysctl writes, no
// interface changes); a previous run's sockets would be its only state, so one that still holds
// a socket (a unix socket in flight not yet collected) is not used: a fresh one of the host's
// root is made instead. Without one (a caller that is not root), the run's own user namespace
// gets a fresh network namespace below.
void EnterNamespaces(int net_fd) {
  const protocol::SandboxRecord& s = spec.sandbox;
  const bool host_root = geteuid() == 0 && s.outside_uid != 0;
  if (net_fd >= 0) {
    if (!host_root) {
      errno = EPERM;
      Die("pooled network namespace without root");
    }
    if (setns(net_fd, CLONE_NEWNET) != 0) Die("join network namespace");
    close(net_fd);
    if (!NetNamespaceIsEmpty() && unshare(CLONE_NEWNET) != 0) Die("unshare network namespace");
  }
  if (host_root) {
    if (setgroups(0, nullptr) != 0) Die("setgroups");
    if (setresgid(s.outside_gid, s.outside_gid, s.outside_gid) != 0) Die("setresgid");
    if (setresuid(s.outside_uid, s.outside_uid, s.outside_uid) != 0) Die("setresuid");
    // A uid change makes the process non-dumpable, which would leave /proc/self/uid_map
    // owned by root.
    prctl(PR_SET_DUMPABLE, 1);
  }
  if (unshare(CLONE_NEWUSER) != 0) Die("unshare user namespace");
  char map[64];
  WriteFileAt("/proc/self/setgroups", "deny");
  snprintf(map, sizeof(map), "0 %u 1", s.outside_uid);
  WriteFileAt("/proc/self/uid_map", map);
  snprintf(map, sizeof(map), "0 %u 1", s.outside_gid);
  WriteFileAt("/proc/self/gid_map", map);
  if (unshare(CLONE_NEWNS | (net_fd >= 0 ? 0 : CLONE_NEWNET) | CLONE_NEWIPC | CLONE_NEWUTS |
              CLONE_NEWPID | CLONE_NEWCGROUP) != 0) {
    Die("unshare namespaces");
  }
}

// Warm start (`lockstep-sandbox-init --warm PROCS...`): the init is spawned before its run is
// known, with its root's records on kRootSpecFd. It joins the run's cgroups at once (with cgroup
// v1 the attach waits for an RCU grace period, ~10 ms), enters the namespaces, and its namespace
// init builds the read-only root: all of it while the caller still works. Then the namespace
// init waits on kSpecFd, a socket, for the run's spec, stdin, stdout and stderr descriptors
// (ReceiveRun), and goes on as a cold start's does. A closed socket (the pool discarded it, or
// the caller died) ends it.
void JoinCgroups(int argc, char** argv, int first) {
  char pid_text[32];
  snprintf(pid_text, sizeof(pid_text), "%d", static_cast<int>(getpid()));
  for (int i = first; i < argc; ++i) WriteFileAt(argv[i], pid_text);
}

// In a warm namespace init: takes the run's descriptors (leaving them where a cold start has
// them: spec at kSpecFd, stdio at 0-2) and the run's records.
void ReceiveRun() {
  char byte = 0;
  iovec io = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  msghdr message = {};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(protocol::kSpecFd, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) _exit(0);
  const cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (header == nullptr || header->cmsg_type != SCM_RIGHTS ||
      header->cmsg_len != CMSG_LEN(4 * sizeof(int))) {
    errno = EPROTO;
    Die("warm start: expected 4 descriptors");
  }
  int fds[4];  // spec, stdin, stdout, stderr
  memcpy(fds, CMSG_DATA(header), sizeof(fds));
  // Tells the launcher the run is ours now; until then it may still start the run cold.
  if (write(protocol::kSpecFd, &byte, 1) != 1) _exit(0);
  // Received with close-on-exec; dup2 copies are without it, as a cold start's descriptors.
  if (dup2(fds[1], 0) < 0 || dup2(fds[2], 1) < 0 || dup2(fds[3], 2) < 0 ||
      dup2(fds[0], protocol::kSpecFd) < 0) {  // closes the socket
    Die("warm start: dup2");
  }
  for (int fd : fds) close(fd);
  ReadSpec(protocol::kSpecFd, SpecPart::kRun);
}

volatile pid_t namespace_init = 0;  // for the SIGTERM handler of main

}  // namespace

// lockstep-sandbox-init [--warm] [--net-ns=FD] [cgroup.procs files of a warm init...]
int main(int argc, char** argv) {
  const pid_t launcher = getppid();
  int arg = 1;
  const bool warm = arg < argc && strcmp(argv[arg], "--warm") == 0;
  if (warm) ++arg;
  int net_fd = -1;
  if (arg < argc && strncmp(argv[arg], "--net-ns=", 9) == 0) net_fd = atoi(argv[arg++] + 9);
  if (warm) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the pool's spawning thread lives as long as the pool
    if (getppid() != launcher) _exit(1);
    JoinCgroups(argc, argv, arg);
    ReadSpec(protocol::kRootSpecFd, SpecPart::kRoot);
    close(protocol::kRootSpecFd);
  } else {
    ReadSpec(protocol::kSpecFd, SpecPart::kAll);
    char pid_text[32];
    snprintf(pid_text, sizeof(pid_text), "%d", static_cast<int>(getpid()));
    for (int i = 0; i < spec.num_cgroups; ++i) WriteFileAt(spec.cgroup_procs[i], pid_text);
  }
  EnterNamespaces(net_fd);
  // Ends the run if the launcher dies (set after the credential changes, which clear it).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(1);

  static int release[2];
  if (pipe2(release, O_CLOEXEC) != 0) Die("pipe");
  static bool warm_start;
  warm_start = warm;
  // The ns init shares this process's memory (CLONE_VM) on a stack of its own: no page tables
  // are copied, no copy-on-write faults follow and no second address space is torn down at its
  // exit (bench/sandbox: CPU per run). From here this process only waits and signals: it
  // allocates nothing and reads no errno the two could race on (they share the thread's libc
  // state); the ns init's descriptors, credentials and namespaces are its own as after a fork.
  constexpr size_t kNsInitStack = 1 << 20;
  void* stack = mmap(nullptr, kNsInitStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) Die("mmap namespace init stack");
  const pid_t ns_init = clone(
      [](void*) -> int {
        close(release[1]);
        NamespaceInit(release[0], warm_start);
      },
      static_cast<char*>(stack) + kNsInitStack, CLONE_VM | SIGCHLD, nullptr);
  if (ns_init < 0) Die("clone namespace init");
  close(release[0]);
  // From here the launcher's end kills the namespace init, which this process then reaps: killed
  // itself, it would leave that one a zombie of the machine's init (holding the run's cgroups).
  namespace_init = ns_init;
  struct sigaction on_parent_death = {};
  on_parent_death.sa_handler = [](int) { kill(namespace_init, SIGKILL); };
  sigaction(SIGTERM, &on_parent_death, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) kill(ns_init, SIGKILL);
  // A warm init's socket is the namespace init's alone: the launcher sees it close if that dies.
  if (warm) close(protocol::kSpecFd);
  const int32_t host_pid = ns_init;
  Report(protocol::kNsInitPid, &host_pid, sizeof(host_pid));
  close(release[1]);  // the ns init starts now; it is the only writer of the report from here
  close(protocol::kReportFd);
  // Until it is reaped: a failed wait is EINTR from the SIGTERM handler (errno is shared with
  // the ns init, so only the pid returned counts; the bound only guards against a spin).
  int status = 0;
  for (int failed = 0; waitpid(ns_init, &status, 0) != ns_init; ++failed) {
    if (failed == 1000) return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
