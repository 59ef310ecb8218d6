#include "sandbox/init_spec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lockstep::sandbox::init {

Spec spec;

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void Report(uint32_t type, const void* a, size_t a_size, const void* b, size_t b_size) {
  protocol::RecordHeader header{type, static_cast<uint32_t>(a_size + b_size)};
  WriteAll(protocol::kReportFd, &header, sizeof(header));
  WriteAll(protocol::kReportFd, a, a_size);
  if (b_size > 0) WriteAll(protocol::kReportFd, b, b_size);
}

void Die(const char* what, const char* detail) {
  const int saved = errno;
  char message[1024];
  snprintf(message, sizeof(message), "%s%s%s: %s", what, detail[0] ? " " : "", detail,
           saved != 0 ? strerror(saved) : "failed");
  Report(protocol::kError, message, strlen(message) + 1);
  _exit(1);
}

namespace {

// Splits a NUL-separated payload into `out` (at most kMaxStrings, then a nullptr).
void SplitStrings(const char* payload, uint32_t length, const char** out) {
  int count = 0;
  uint32_t offset = 0;
  while (offset < length && count < kMaxStrings) {
    out[count++] = payload + offset;
    offset += static_cast<uint32_t>(strnlen(payload + offset, length - offset)) + 1;
  }
  out[count] = nullptr;
}

[[noreturn]] void Refuse(const char* what) {
  errno = EINVAL;
  Die(what);
}

// A run's sandbox record on a warm init: the identity and /proc must be those the root was
// built with; the working directory's size is the run's own.
void TakeRunSandboxRecord(const protocol::SandboxRecord& run) {
  if (run.outside_uid != spec.sandbox.outside_uid || run.outside_gid != spec.sandbox.outside_gid ||
      run.mount_proc != spec.sandbox.mount_proc) {
    Refuse("warm start: the run's sandbox record differs from its root's");
  }
  spec.sandbox.work_dir_bytes = run.work_dir_bytes;
  spec.sandbox.work_dir_inodes = run.work_dir_inodes;
}

}  // namespace

void ReadSpec(int fd, SpecPart part) {
  struct stat st;
  if (fstat(fd, &st) != 0) Die("fstat spec");
  const size_t size = static_cast<size_t>(st.st_size);
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) Die("mmap spec");
  const char* data = static_cast<const char*>(mapped);
  const bool root_records = part != SpecPart::kRun;
  const bool run_records = part != SpecPart::kRoot;
  bool have_sandbox = false;
  size_t offset = 0;
  while (offset + sizeof(protocol::RecordHeader) <= size) {
    protocol::RecordHeader header;
    memcpy(&header, data + offset, sizeof(header));
    offset += sizeof(header);
    if (offset + header.length > size) break;
    const char* payload = data + offset;
    offset += header.length;
    const bool root_record = header.type == protocol::kReadOnlyBind ||
                             header.type == protocol::kDeviceBind ||
                             header.type == protocol::kSymlink;
    if (root_record ? !root_records : (!run_records && header.type != protocol::kSandbox)) {
      Refuse(root_record ? "warm start: root records in a run's spec"
                         : "warm start: run records in a root's spec");
    }
    // Strings were written NUL-terminated by the launcher; lengths include the NULs.
    switch (header.type) {
      case protocol::kSandbox: {
        protocol::SandboxRecord record;
        if (header.length != sizeof(record)) Refuse("sandbox record of the wrong size");
        memcpy(&record, payload, sizeof(record));
        if (part == SpecPart::kRun) {
          TakeRunSandboxRecord(record);
        } else {
          spec.sandbox = record;
        }
        have_sandbox = true;
        break;
      }
      case protocol::kReadOnlyBind:
      case protocol::kDeviceBind: {
        if (spec.num_binds == kMaxBinds) Die("too many bind mounts");
        Bind& bind = spec.binds[spec.num_binds++];
        bind.source = payload;
        bind.target = payload + strlen(payload) + 1;
        bind.device = header.type == protocol::kDeviceBind;
        break;
      }
      case protocol::kSymlink: {
        if (spec.num_links == kMaxBinds) Die("too many symlinks");
        Link& link = spec.links[spec.num_links++];
        link.target = payload;
        link.path = payload + strlen(payload) + 1;
        break;
      }
      case protocol::kFile: {
        if (spec.num_files == kMaxFiles) Die("too many files");
        protocol::FileRecord file_header;
        memcpy(&file_header, payload, sizeof(file_header));
        File& file = spec.files[spec.num_files++];
        file.mode = file_header.mode;
        file.path = payload + sizeof(file_header);
        file.content = file.path + file_header.path_length;
        file.size = header.length - sizeof(file_header) - file_header.path_length;
        break;
      }
      case protocol::kCgroupProcs:
        if (part == SpecPart::kRun) Refuse("warm start: cgroups in a run's spec");
        if (spec.num_cgroups == 8) Die("too many cgroups");
        spec.cgroup_procs[spec.num_cgroups++] = payload;
        break;
      case protocol::kSeccompFilter:
        spec.seccomp.len = static_cast<unsigned short>(header.length / sizeof(sock_filter));
        spec.seccomp.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(payload));
        break;
      case protocol::kStep:
        if (spec.num_steps == kMaxSteps) Die("too many steps");
        memcpy(&spec.steps[spec.num_steps++].limits, payload, sizeof(protocol::StepRecord));
        break;
      case protocol::kArgv:
        if (spec.num_steps == 0) Die("argv before a step");
        SplitStrings(payload, header.length, spec.steps[spec.num_steps - 1].argv);
        break;
      case protocol::kEnv:
        if (spec.num_steps == 0) Die("env before a step");
        SplitStrings(payload, header.length, spec.steps[spec.num_steps - 1].env);
        break;
      default:
        Refuse("unknown spec record");
    }
  }
  if (!have_sandbox || (run_records && spec.num_steps == 0)) Refuse("incomplete spec");
  spec.have_sandbox = true;
}

}  // namespace lockstep::sandbox::init
