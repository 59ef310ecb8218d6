// Test support: restores LibTorch's intra-op thread count when the scope ends, for tests that
// change it (thread-count invariance checks). Header-only.
#ifndef LOCKSTEP_TESTS_SUPPORT_SCOPED_THREAD_COUNT_H_
#define LOCKSTEP_TESTS_SUPPORT_SCOPED_THREAD_COUNT_H_

#include <ATen/Parallel.h>

namespace lockstep::test_support {

class ScopedThreadCount {
 public:
  ScopedThreadCount() : saved_(at::get_num_threads()) {}
  ~ScopedThreadCount() { at::set_num_threads(saved_); }
  ScopedThreadCount(const ScopedThreadCount&) = delete;
  ScopedThreadCount& operator=(const ScopedThreadCount&) = delete;

 private:
  int saved_;
};

}  // namespace lockstep::test_support

#endif  // LOCKSTEP_TESTS_SUPPORT_SCOPED_THREAD_COUNT_H_
