#include "sandbox/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

// A live warm init acknowledges its run in microseconds; this only bounds a stopped one.
constexpr int kWarmAckTimeoutMs = 10000;

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

void AppendRecord(std::string* out, uint32_t type, const void* data, size_t size) {
  protocol::RecordHeader header{type, static_cast<uint32_t>(size)};
  out->append(reinterpret_cast<const char*>(&header), sizeof(header));
  out->append(static_cast<const char*>(data), size);
}

void AppendStrings(std::string* out, uint32_t type, const std::vector<std::string>& strings) {
  std::string payload;
  for (const std::string& s : strings) payload.append(s.c_str(), s.size() + 1);
  AppendRecord(out, type, payload.data(), payload.size());
}

std::string EncodeRunRecords(const LaunchSpec& spec, std::string out);

// The records of `spec`: the root's (the sandbox record, binds, symlinks) and/or the run's (the
// sandbox record again, files, cgroups, seccomp, steps). A cold start gets both in one; a warm
// init gets the root's at its spawn and the run's with its run.
std::string EncodeSpec(const LaunchSpec& spec, bool root, bool run) {
  std::string out;
  AppendRecord(&out, protocol::kSandbox, &spec.sandbox, sizeof(spec.sandbox));
  if (!root) return EncodeRunRecords(spec, std::move(out));
  for (const auto& [source, target] : spec.read_only_binds) {
    AppendStrings(&out, protocol::kReadOnlyBind, {source, target});
  }
  for (const auto& [source, target] : spec.device_binds) {
    AppendStrings(&out, protocol::kDeviceBind, {source, target});
  }
  for (const auto& [target, path] : spec.symlinks) {
    AppendStrings(&out, protocol::kSymlink, {target, path});
  }
  return run ? EncodeRunRecords(spec, std::move(out)) : out;
}

std::string EncodeRunRecords(const LaunchSpec& spec, std::string out) {
  for (const LaunchFile& file : spec.files) {
    protocol::FileRecord header{file.mode, static_cast<uint32_t>(file.path.size() + 1)};
    std::string payload(reinterpret_cast<const char*>(&header), sizeof(header));
    payload.append(file.path.c_str(), file.path.size() + 1);
    payload.append(file.content);
    AppendRecord(&out, protocol::kFile, payload.data(), payload.size());
  }
  for (const std::string& procs : spec.cgroup_procs) {
    AppendStrings(&out, protocol::kCgroupProcs, {procs});
  }
  if (!spec.seccomp_filter.empty()) {
    AppendRecord(&out, protocol::kSeccompFilter, spec.seccomp_filter.data(),
                 spec.seccomp_filter.size());
  }
  for (const LaunchStep& step : spec.steps) {
    AppendRecord(&out, protocol::kStep, &step.limits, sizeof(step.limits));
    AppendStrings(&out, protocol::kArgv, step.argv);
    AppendStrings(&out, protocol::kEnv, step.env);
  }
  return out;
}

// A sealed, read-only-from-now-on memfd holding `bytes`.
absl::StatusOr<int> SealedMemfd(const char* name, const std::string& bytes) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", strerror(errno)));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return absl::InternalError(absl::StrCat("writing ", name, ": ", strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
  lseek(fd, 0, SEEK_SET);
  return fd;
}

absl::Status Pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return absl::OkStatus();
}

// Parses complete records out of `buffer` into `outcome`; returns the host pid of the ns init
// when that record arrives (0 otherwise).
pid_t ParseReport(std::string* buffer, LaunchOutcome* outcome) {
  pid_t ns_init = 0;
  size_t offset = 0;
  while (buffer->size() - offset >= sizeof(protocol::RecordHeader)) {
    protocol::RecordHeader header;
    memcpy(&header, buffer->data() + offset, sizeof(header));
    if (buffer->size() - offset - sizeof(header) < header.length) break;
    const char* payload = buffer->data() + offset + sizeof(header);
    if (header.type == protocol::kNsInitPid && header.length == sizeof(int32_t)) {
      int32_t pid;
      memcpy(&pid, payload, sizeof(pid));
      ns_init = pid;
    } else if (header.type == protocol::kStepDone && header.length >= sizeof(protocol::StepDoneRecord)) {
      LaunchOutcome::Step step;
      memcpy(&step.done, payload, sizeof(step.done));
      step.captured_output.assign(payload + sizeof(step.done),
                                  header.length - sizeof(step.done));
      outcome->steps.push_back(std::move(step));
    } else if (header.type == protocol::kError) {
      outcome->error.assign(payload, strnlen(payload, header.length));
    }
    offset += sizeof(header) + header.length;
  }
  buffer->erase(0, offset);
  return ns_init;
}

// posix_spawn of the init with descriptors 0..n-1 = `fds` (the rest closed), a clean signal state
// and no environment.
absl::StatusOr<pid_t> SpawnInit(const std::string& init_path, const std::vector<int>& fds,
                                const std::vector<std::string>& arguments) {
  // The dup2s run in order: a source below fds.size() could be overwritten by an earlier one
  // before its own turn, so such a source is first copied above that range.
  std::vector<Fd> copies;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (size_t target = 0; target < fds.size(); ++target) {
    int source = fds[target];
    if (source < static_cast<int>(fds.size()) && source != static_cast<int>(target)) {
      copies.emplace_back(fcntl(source, F_DUPFD_CLOEXEC, static_cast<int>(fds.size())));
      source = copies.back().get();
    }
    posix_spawn_file_actions_adddup2(&actions, source, static_cast<int>(target));
  }
  posix_spawn_file_actions_addclosefrom_np(&actions, static_cast<int>(fds.size()));
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  // The caller may block or ignore signals (servers ignore SIGPIPE); the sandbox starts clean.
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv = {const_cast<char*>("lockstep-sandbox-init")};
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  char* const envp[] = {nullptr};
  pid_t pid = -1;
  const int spawn_error =
      posix_spawn(&pid, init_path.c_str(), &actions, &attributes, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawn_error != 0) {
    return absl::InternalError(
        absl::StrCat("posix_spawn ", init_path, ": ", strerror(spawn_error)));
  }
  return pid;
}

// A network namespace for the init (net_namespace_pool.h), if any: its descriptor goes next after
// `fds`, and `--net-ns=N` tells the init where.
void AddNetNamespace(int net_namespace_fd, std::vector<int>* fds,
                     std::vector<std::string>* arguments) {
  if (net_namespace_fd < 0) return;
  arguments->push_back(absl::StrCat("--net-ns=", fds->size()));
  fds->push_back(net_namespace_fd);
}

// The descriptors of one run, before the init has them.
struct RunDescriptors {
  Fd spec, stdin_memfd, out_read, out_write, err_read, err_write;
};

// `warm`: the spec holds the run's records only (the warm init built the root already).
absl::Status MakeRunDescriptors(const LaunchSpec& spec, bool warm, RunDescriptors* run) {
  absl::StatusOr<int> spec_fd =
      SealedMemfd("lockstep-sandbox-spec", EncodeSpec(spec, /*root=*/!warm, /*run=*/true));
  if (!spec_fd.ok()) return spec_fd.status();
  run->spec = Fd(*spec_fd);
  absl::StatusOr<int> stdin_fd = SealedMemfd("lockstep-sandbox-stdin", spec.stdin_data);
  if (!stdin_fd.ok()) return stdin_fd.status();
  run->stdin_memfd = Fd(*stdin_fd);
  int out[2], err[2];
  if (absl::Status s = Pipe(out); !s.ok()) return s;
  run->out_read = Fd(out[0]);
  run->out_write = Fd(out[1]);
  if (absl::Status s = Pipe(err); !s.ok()) return s;
  run->err_read = Fd(err[0]);
  run->err_write = Fd(err[1]);
  return absl::OkStatus();
}

// Collects the run of the init `outer` (started at `start`) to its end: output up to the cap,
// the report, the backstop deadline, the reap. The run ends when its ns init is dead (or the outer
// init, before the ns init is known), not when its pipes close: a process outside the run that
// forked while one of their write ends was open in this process (a fork that never execs keeps
// even close-on-exec descriptors) holds it open past the run.
LaunchOutcome Collect(pid_t outer, Fd& out_read, Fd& err_read, Fd& report_read,
                      const LaunchSpec& spec, Clock::time_point start) {
  LaunchOutcome outcome;
  std::string report_buffer;
  Fd outer_pidfd(static_cast<int>(syscall(SYS_pidfd_open, outer, 0)));
  Fd ns_init_pidfd;
  bool killed = false;
  bool dead = false;
  // Ends the run: the ns init's death empties the PID namespace before the outer process, which
  // waits for it, can exit.
  auto kill_run = [&] {
    if (killed) return;
    killed = true;
    // Not the outer process too: it must live to reap the ns init, which happens only once the
    // namespace is empty. Before the ns init exists, the outer process is all there is.
    if (ns_init_pidfd.get() < 0 ||
        syscall(SYS_pidfd_send_signal, ns_init_pidfd.get(), SIGKILL, nullptr, 0) != 0) {
      kill(outer, SIGKILL);
    }
  };
  const Clock::time_point deadline = start + std::chrono::milliseconds(spec.deadline_ms);
  struct Stream {
    Fd* fd;
    std::string* data;
    bool open = true;
  };
  Stream streams[3] = {{&out_read, &outcome.stdout_data},
                       {&err_read, &outcome.stderr_data},
                       {&report_read, &report_buffer}};
  const size_t cap = static_cast<size_t>(spec.max_output_bytes);
  char chunk[65536];
  // One read of a stream that poll found ready.
  auto read_stream = [&](int i) {
    Stream& stream = streams[i];
    const ssize_t n = read(stream.fd->get(), chunk, sizeof(chunk));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      stream.open = false;
      return;
    }
    if (n < 0) return;
    if (i == 2) {
      stream.data->append(chunk, static_cast<size_t>(n));
      const pid_t pid = ParseReport(&report_buffer, &outcome);
      if (pid > 0 && ns_init_pidfd.get() < 0) {
        ns_init_pidfd = Fd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
      }
      return;
    }
    const size_t room = cap > stream.data->size() ? cap - stream.data->size() : 0;
    stream.data->append(chunk, std::min(room, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) > room) {
      outcome.output_limit = true;
      if (!dead) kill_run();
    }
  };
  while (!dead) {
    // Without a pidfd (a kernel before 5.3), the end of the output is the end of the run.
    const int watched = ns_init_pidfd.get() >= 0 ? ns_init_pidfd.get() : outer_pidfd.get();
    pollfd fds[4];
    int count = 0;
    int index[4];
    for (int i = 0; i < 3; ++i) {
      if (!streams[i].open) continue;
      fds[count] = {streams[i].fd->get(), POLLIN, 0};
      index[count++] = i;
    }
    if (watched < 0 && count == 0) break;
    if (watched >= 0) {
      fds[count] = {watched, POLLIN, 0};
      index[count++] = -1;
    }
    const auto now = Clock::now();
    if (now >= deadline && !killed) {
      outcome.deadline_killed = true;
      kill_run();
    }
    const int timeout_ms =
        killed ? 1000
               : static_cast<int>(
                     std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1);
    const int ready = poll(fds, count, timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    for (int k = 0; k < count && ready > 0; ++k) {
      if (fds[k].revents == 0) continue;
      if (index[k] < 0) {
        dead = true;
      } else {
        read_stream(index[k]);
      }
    }
  }
  // Dead: what the run wrote is in the pipes already; read it without waiting for their end.
  for (int i = 0; dead && i < 3; ++i) {
    while (streams[i].open) {
      pollfd ready = {streams[i].fd->get(), POLLIN, 0};
      if (poll(&ready, 1, 0) != 1) break;
      read_stream(i);
    }
  }
  if (ns_init_pidfd.get() >= 0) {
    // The run is over once the ns init is dead: the kernel empties its PID namespace before
    // that. The outer init exits right after, tearing the run's other namespaces down; the
    // caller reaps it (unreaped_init), so the result does not wait for that. A failure of the ns
    // init reported itself (kError) or left a step unreported.
    // One learnt only after a kill went to the outer init is ended here.
    if (killed) syscall(SYS_pidfd_send_signal, ns_init_pidfd.get(), SIGKILL, nullptr, 0);
    pollfd gone = {ns_init_pidfd.get(), POLLIN, 0};
    while (poll(&gone, 1, -1) < 0 && errno == EINTR) {
    }
    outcome.unreaped_init = outer;
  } else {
    // The outer init ended before its ns init was known (or that one was reaped already).
    int status = 0;
    while (waitpid(outer, &status, 0) < 0 && errno == EINTR) {
    }
    if (outcome.error.empty() && !killed && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
      outcome.error = absl::StrCat("sandbox init ended with status ", status);
    }
  }
  outcome.total_wall_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return outcome;
}

}  // namespace

absl::StatusOr<LaunchOutcome> Launch(const std::string& init_path, const LaunchSpec& spec,
                                     int net_namespace_fd) {
  const Clock::time_point start = Clock::now();
  RunDescriptors run;
  if (absl::Status s = MakeRunDescriptors(spec, /*warm=*/false, &run); !s.ok()) return s;
  int report[2];
  if (absl::Status s = Pipe(report); !s.ok()) return s;
  Fd report_read(report[0]), report_write(report[1]);
  std::vector<int> fds = {run.stdin_memfd.get(), run.out_write.get(), run.err_write.get(),
                          run.spec.get(), report_write.get()};
  std::vector<std::string> arguments;
  AddNetNamespace(net_namespace_fd, &fds, &arguments);
  absl::StatusOr<pid_t> outer = SpawnInit(init_path, fds, arguments);
  if (!outer.ok()) return outer.status();
  run.spec.Reset();
  run.stdin_memfd.Reset();
  run.out_write.Reset();
  run.err_write.Reset();
  report_write.Reset();
  return Collect(*outer, run.out_read, run.err_read, report_read, spec, start);
}

absl::StatusOr<WarmInit> SpawnWarmInit(const std::string& init_path,
                                       const std::vector<std::string>& cgroup_procs,
                                       const LaunchSpec& root, int net_namespace_fd) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", strerror(errno)));
  }
  Fd ours(sockets[0]), theirs(sockets[1]);
  int report[2];
  if (absl::Status s = Pipe(report); !s.ok()) return s;
  Fd report_read(report[0]), report_write(report[1]);
  Fd null(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (null.get() < 0) return absl::InternalError(absl::StrCat("open /dev/null: ", strerror(errno)));
  absl::StatusOr<int> root_fd =
      SealedMemfd("lockstep-sandbox-root", EncodeSpec(root, /*root=*/true, /*run=*/false));
  if (!root_fd.ok()) return root_fd.status();
  Fd root_spec(*root_fd);
  std::vector<int> fds = {null.get(),   null.get(),         null.get(),
                          theirs.get(), report_write.get(), root_spec.get()};
  std::vector<std::string> arguments = {"--warm"};
  AddNetNamespace(net_namespace_fd, &fds, &arguments);
  arguments.insert(arguments.end(), cgroup_procs.begin(), cgroup_procs.end());
  absl::StatusOr<pid_t> pid = SpawnInit(init_path, fds, arguments);
  if (!pid.ok()) return pid.status();
  WarmInit warm;
  warm.pid = *pid;
  warm.socket = ours.Release();
  warm.report_read = report_read.Release();
  return warm;
}

void DiscardWarmInit(WarmInit* warm) {
  if (warm->pid <= 0) return;
  // The init reads end-of-file and exits; shutdown, not just close, as a copy of our end may
  // live on in a process forked meanwhile.
  shutdown(warm->socket, SHUT_RDWR);
  close(warm->socket);
  close(warm->report_read);
  while (waitpid(warm->pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  *warm = WarmInit();
}

absl::StatusOr<LaunchOutcome> LaunchWarm(WarmInit warm, const LaunchSpec& spec) {
  const Clock::time_point start = Clock::now();
  Fd socket_fd(warm.socket), report_read(warm.report_read);
  RunDescriptors run;
  absl::Status made = MakeRunDescriptors(spec, /*warm=*/true, &run);
  int fds[4] = {run.spec.get(), run.stdin_memfd.get(), run.out_write.get(), run.err_write.get()};
  char byte = 0;
  iovec io = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  msghdr message = {};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(header), fds, sizeof(fds));
  ssize_t sent = -1;
  std::string reason;
  if (!made.ok()) {
    reason = std::string(made.message());
  } else {
    do {
      sent = sendmsg(socket_fd.get(), &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent != 1) reason = absl::StrCat("sendmsg: ", strerror(errno));
  }
  // The init acknowledges the descriptors; end-of-file means it died before taking them.
  if (reason.empty()) {
    pollfd ack = {socket_fd.get(), POLLIN, 0};
    char byte_back = 0;
    const int ready = poll(&ack, 1, kWarmAckTimeoutMs);
    if (ready != 1 || recv(socket_fd.get(), &byte_back, 1, 0) != 1) {
      reason = ready == 0 ? "no acknowledgement in time" : "it ended before taking its run";
      kill(warm.pid, SIGKILL);
    }
  }
  socket_fd.Reset();
  if (!reason.empty()) {
    report_read.Reset();
    while (waitpid(warm.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return absl::UnavailableError(absl::StrCat("warm sandbox init unusable: ", reason));
  }
  run.spec.Reset();
  run.stdin_memfd.Reset();
  run.out_write.Reset();
  run.err_write.Reset();
  return Collect(warm.pid, run.out_read, run.err_read, report_read, spec, start);
}

}  // namespace lockstep::sandbox
