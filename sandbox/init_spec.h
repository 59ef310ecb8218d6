// lockstep-sandbox-init's view of its run (launch_protocol.h): the spec records parsed into
// fixed arrays that point into the mapped spec, and the report side (records to the launcher,
// fatal errors). libc only, as the rest of the static init binary (init_main.cc).
#ifndef LOCKSTEP_SANDBOX_INIT_SPEC_H_
#define LOCKSTEP_SANDBOX_INIT_SPEC_H_

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/launch_protocol.h"

namespace lockstep::sandbox::init {

constexpr int kMaxBinds = 64;
constexpr int kMaxFiles = 256;
constexpr int kMaxSteps = 4;
constexpr int kMaxStrings = 256;

struct Bind {
  const char* source;
  const char* target;
  bool device;
};
struct Link {
  const char* target;
  const char* path;
};
struct File {
  uint32_t mode;
  const char* path;
  const char* content;
  size_t size;
};
struct Step {
  protocol::StepRecord limits;
  const char* argv[kMaxStrings + 1];
  const char* env[kMaxStrings + 1];
};

struct Spec {
  protocol::SandboxRecord sandbox;
  bool have_sandbox = false;
  Bind binds[kMaxBinds];
  int num_binds = 0;
  Link links[kMaxBinds];
  int num_links = 0;
  File files[kMaxFiles];
  int num_files = 0;
  const char* cgroup_procs[8];
  int num_cgroups = 0;
  sock_fprog seccomp = {0, nullptr};
  Step steps[kMaxSteps];
  int num_steps = 0;
};

extern Spec spec;

void WriteAll(int fd, const void* data, size_t size);

// One record to the launcher on kReportFd.
void Report(uint32_t type, const void* a, size_t a_size, const void* b = nullptr,
            size_t b_size = 0);

// Reports "what: strerror(errno)" and exits. Safe after fork (no allocation).
[[noreturn]] void Die(const char* what, const char* detail = "");

// Which records a spec may hold.
enum class SpecPart {
  kAll,   // a cold start: the root's and the run's records in one
  kRoot,  // a warm init's root records (kSandbox, binds, symlinks) only
  kRun,   // a warm init's run: no root records (the root is built); the same identity as its root
};

// Maps the spec on `fd` and adds its records to `spec`; dies on a record `part` may not hold.
void ReadSpec(int fd, SpecPart part);

}  // namespace lockstep::sandbox::init

#endif  // LOCKSTEP_SANDBOX_INIT_SPEC_H_
