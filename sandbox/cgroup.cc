#include "sandbox/cgroup.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace lockstep::sandbox {
namespace {

constexpr absl::string_view kGroupName = "lockstep-sandbox";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

bool HasWord(absl::string_view text, absl::string_view word) {
  for (absl::string_view w : absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (w == word) return true;
  }
  return false;
}

// The path of this process's cgroup in the hierarchy whose /proc/self/cgroup line has
// `controllers` in its second field ("" for the v2 line "0::/path").
std::string OwnCgroupPath(absl::string_view controllers) {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/cgroup"), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (controllers.empty() ? fields[1].empty() : HasWord(absl::StrReplaceAll(fields[1], {{",", " "}}), controllers)) {
      return std::string(fields[2] == "/" ? "" : fields[2]);
    }
  }
  return "";
}

// The mount point of the cgroup2 filesystem, "" if none.
std::string Cgroup2MountPoint() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/mountinfo"), '\n')) {
    // "... mount_point options - cgroup2 source super_options"
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    for (size_t i = 0; i + 1 < fields.size(); ++i) {
      if (fields[i] == "-" && fields[i + 1] == "cgroup2" && fields.size() > 4) {
        return std::string(fields[4]);
      }
    }
  }
  return "";
}

// mkdir that treats "already there" as success.
bool MakeDir(const std::string& path) { return mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

// Creates and removes a probe directory under `parent`.
bool CanCreateUnder(const std::string& parent) {
  const std::string probe = absl::StrCat(parent, "/probe-", getpid());
  if (mkdir(probe.c_str(), 0755) != 0) return false;
  rmdir(probe.c_str());
  return true;
}

std::string ProbeV2(CgroupSupport* support) {
  const std::string mount = Cgroup2MountPoint();
  if (mount.empty()) return "no cgroup2 filesystem is mounted";
  const std::string own = absl::StrCat(mount, OwnCgroupPath(""));
  const std::string controllers = ReadFile(absl::StrCat(own, "/cgroup.controllers"));
  if (!HasWord(controllers, "memory") || !HasWord(controllers, "pids")) {
    return absl::StrCat(own, "/cgroup.controllers lacks memory or pids (has \"",
                        absl::StripAsciiWhitespace(controllers), "\")");
  }
  // A cgroup with processes may not delegate controllers (except the root): the sandbox's
  // group goes under our own cgroup only if it already delegates them or is the root.
  const bool is_root = own == mount;
  const std::string subtree = ReadFile(absl::StrCat(own, "/cgroup.subtree_control"));
  if (!is_root && (!HasWord(subtree, "memory") || !HasWord(subtree, "pids"))) {
    return absl::StrCat(own, " holds processes and does not delegate memory and pids");
  }
  if (is_root) WriteFile(absl::StrCat(own, "/cgroup.subtree_control"), "+memory +pids +cpu");
  const std::string parent = absl::StrCat(own, "/", kGroupName);
  if (!MakeDir(parent)) return absl::StrCat("cannot create ", parent, ": ", strerror(errno));
  const bool cpu = HasWord(controllers, "cpu");
  WriteFile(absl::StrCat(parent, "/cgroup.subtree_control"), cpu ? "+memory +pids +cpu" : "+memory +pids");
  const std::string delegated = ReadFile(absl::StrCat(parent, "/cgroup.subtree_control"));
  if (!HasWord(delegated, "memory") || !HasWord(delegated, "pids") || !CanCreateUnder(parent)) {
    return absl::StrCat("cannot delegate memory and pids under ", parent);
  }
  support->kind = CgroupSupport::Kind::kV2;
  support->v2_parent = parent;
  support->cpu = HasWord(delegated, "cpu");
  support->statement = absl::StrCat("cgroup v2 (memory, pids", support->cpu ? ", cpu" : "",
                                    ") under ", parent);
  return "";
}

std::string ProbeV1(CgroupSupport* support) {
  const std::string memory =
      absl::StrCat("/sys/fs/cgroup/memory", OwnCgroupPath("memory"), "/", kGroupName);
  const std::string pids = absl::StrCat("/sys/fs/cgroup/pids", OwnCgroupPath("pids"), "/", kGroupName);
  struct stat st;
  if (stat("/sys/fs/cgroup/memory/memory.limit_in_bytes", &st) != 0 ||
      stat("/sys/fs/cgroup/pids/cgroup.procs", &st) != 0) {
    return "no cgroup v1 memory and pids hierarchies at /sys/fs/cgroup/{memory,pids}";
  }
  if (!MakeDir(memory) || !MakeDir(pids) || !CanCreateUnder(memory) || !CanCreateUnder(pids)) {
    return absl::StrCat("cgroup v1 hierarchies are not writable (", memory, ")");
  }
  support->kind = CgroupSupport::Kind::kV1;
  support->v1_memory_parent = memory;
  support->v1_pids_parent = pids;
  support->statement = absl::StrCat("cgroup v1 (memory, pids) under ", memory, " and ", pids);
  return "";
}

std::string UniqueRunName() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("run-", getpid(), "-", counter.fetch_add(1));
}

}  // namespace

CgroupSupport ProbeCgroups() {
  CgroupSupport support;
  const std::string v2_reason = ProbeV2(&support);
  if (support.kind != CgroupSupport::Kind::kNone) return support;
  const std::string v1_reason = ProbeV1(&support);
  if (support.kind != CgroupSupport::Kind::kNone) return support;
  support.statement = absl::StrCat("no cgroup (v2: ", v2_reason, "; v1: ", v1_reason,
                                   "): memory and process limits are per-process rlimits only");
  return support;
}

absl::StatusOr<RunCgroup> RunCgroup::Create(const CgroupSupport& support) {
  RunCgroup cgroup;
  cgroup.kind_ = support.kind;
  cgroup.cpu_ = support.cpu;
  const std::string name = UniqueRunName();
  auto make = [&](const std::string& parent) -> absl::StatusOr<std::string> {
    std::string directory = absl::StrCat(parent, "/", name);
    if (mkdir(directory.c_str(), 0755) != 0) {
      return absl::InternalError(absl::StrCat("cgroup: mkdir ", directory, ": ", strerror(errno)));
    }
    cgroup.directories_.push_back(directory);
    cgroup.procs_files_.push_back(absl::StrCat(directory, "/cgroup.procs"));
    return directory;
  };
  if (support.kind == CgroupSupport::Kind::kV2) {
    absl::StatusOr<std::string> dir = make(support.v2_parent);
    if (!dir.ok()) return dir.status();
    cgroup.memory_directory_ = cgroup.pids_directory_ = *dir;
  } else if (support.kind == CgroupSupport::Kind::kV1) {
    absl::StatusOr<std::string> dir = make(support.v1_memory_parent);
    if (!dir.ok()) return dir.status();
    cgroup.memory_directory_ = *dir;
    absl::StatusOr<std::string> pids = make(support.v1_pids_parent);
    if (!pids.ok()) return pids.status();
    cgroup.pids_directory_ = *pids;
  }
  return cgroup;
}

absl::StatusOr<RunCgroup> RunCgroup::Create(const CgroupSupport& support,
                                            const CgroupLimits& limits) {
  absl::StatusOr<RunCgroup> cgroup = Create(support);
  if (!cgroup.ok()) return cgroup.status();
  if (absl::Status s = cgroup->SetLimits(limits); !s.ok()) return s;
  return cgroup;
}

absl::Status RunCgroup::SetLimits(const CgroupLimits& limits) {
  auto write = [](const std::string& file, absl::string_view value) -> absl::Status {
    if (WriteFile(file, value)) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cgroup: cannot write ", value, " to ", file));
  };
  const std::string memory = absl::StrCat(limits.memory_bytes);
  const std::string processes = absl::StrCat(limits.max_processes);
  if (kind_ == CgroupSupport::Kind::kV2) {
    const std::string& dir = memory_directory_;
    if (absl::Status s = write(absl::StrCat(dir, "/memory.max"), memory); !s.ok()) return s;
    WriteFile(absl::StrCat(dir, "/memory.swap.max"), "0");  // absent without swap accounting
    if (absl::Status s = write(absl::StrCat(dir, "/pids.max"), processes); !s.ok()) return s;
    if (cpu_ && limits.cpu_cores > 0) {
      const int64_t period = 100000;
      const int64_t quota = static_cast<int64_t>(limits.cpu_cores * period);
      if (absl::Status s = write(absl::StrCat(dir, "/cpu.max"), absl::StrCat(quota, " ", period));
          !s.ok()) {
        return s;
      }
    }
  } else if (kind_ == CgroupSupport::Kind::kV1) {
    if (absl::Status s = write(absl::StrCat(memory_directory_, "/memory.limit_in_bytes"), memory);
        !s.ok()) {
      return s;
    }
    // Swap accounting, where the kernel has it (the file is absent otherwise).
    WriteFile(absl::StrCat(memory_directory_, "/memory.memsw.limit_in_bytes"), memory);
    if (absl::Status s = write(absl::StrCat(pids_directory_, "/pids.max"), processes); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void RemoveStaleRunCgroups(const CgroupSupport& support) {
  for (const std::string& parent :
       {support.v2_parent, support.v1_memory_parent, support.v1_pids_parent}) {
    if (parent.empty()) continue;
    DIR* dir = opendir(parent.c_str());
    if (dir == nullptr) continue;
    while (dirent* entry = readdir(dir)) {
      absl::string_view name = entry->d_name;
      if (!absl::ConsumePrefix(&name, "run-")) continue;
      int pid = 0;
      if (!absl::SimpleAtoi(name.substr(0, name.find('-')), &pid) || pid <= 0) continue;
      if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // its process lives on
      rmdir(absl::StrCat(parent, "/", entry->d_name).c_str());  // fails harmlessly if busy
    }
    closedir(dir);
  }
}

RunCgroup::RunCgroup(RunCgroup&& other) noexcept
    : kind_(other.kind_),
      directories_(std::move(other.directories_)),
      procs_files_(std::move(other.procs_files_)),
      memory_directory_(std::move(other.memory_directory_)),
      pids_directory_(std::move(other.pids_directory_)),
      cpu_(other.cpu_) {
  other.directories_.clear();
}

RunCgroup::~RunCgroup() {
  for (const std::string& directory : directories_) rmdir(directory.c_str());
}

bool RunCgroup::MemoryLimitHit() const {
  if (memory_directory_.empty()) return false;
  auto counter = [](const std::string& text, absl::string_view key) -> int64_t {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::ConsumePrefix(&line, key) && absl::ConsumePrefix(&line, " ")) {
        int64_t value = 0;
        if (absl::SimpleAtoi(line, &value)) return value;
      }
    }
    return 0;
  };
  if (kind_ == CgroupSupport::Kind::kV2) {
    return counter(ReadFile(absl::StrCat(memory_directory_, "/memory.events")), "oom_kill") > 0;
  }
  int64_t failures = 0;
  absl::SimpleAtoi(
      absl::StripAsciiWhitespace(ReadFile(absl::StrCat(memory_directory_, "/memory.failcnt"))),
      &failures);
  return failures > 0 ||
         counter(ReadFile(absl::StrCat(memory_directory_, "/memory.oom_control")), "oom_kill") > 0;
}

}  // namespace lockstep::sandbox
