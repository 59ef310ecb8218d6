// The seccomp filter every sandboxed program runs under: an allowlist of the system calls that
// interpreters, compilers and ordinary programs use; everything else fails with EPERM.
//
// Denied (EPERM), among others: ptrace, process_vm_readv/writev, mount/umount2/pivot_root/
// chroot, unshare/setns and clone with any CLONE_NEW* flag (clone3 answers ENOSYS so that libc
// falls back to clone, whose flags the filter can read), bpf, perf_event_open, keyctl/add_key/
// request_key, kexec_*, *_module, reboot, swapon, iopl/ioperm, userfaultfd, io_uring_*,
// open_by_handle_at, mknod, setuid-family calls, and sockets of any family but AF_UNIX.
#ifndef LOCKSTEP_SANDBOX_SECCOMP_POLICY_H_
#define LOCKSTEP_SANDBOX_SECCOMP_POLICY_H_

#include <string>

#include "absl/status/statusor.h"

namespace lockstep::sandbox {

// The filter as a classic BPF program (an array of struct sock_filter, as bytes), ready for
// prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER). Built with libseccomp for the native
// architecture; other architectures' system calls kill the process. Internal on failure.
// Thread-safe; build it once per process and reuse it.
absl::StatusOr<std::string> BuildSeccompFilter();

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_SECCOMP_POLICY_H_
