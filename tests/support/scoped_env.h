// Test support: sets (or, with a null value, unsets) one environment variable for a scope and
// restores what was there when the scope ends. Header-only, no LibTorch.
#ifndef LOCKSTEP_TESTS_SUPPORT_SCOPED_ENV_H_
#define LOCKSTEP_TESTS_SUPPORT_SCOPED_ENV_H_

#include <cstdlib>
#include <optional>
#include <string>

namespace lockstep::test_support {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value != nullptr ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace lockstep::test_support

#endif  // LOCKSTEP_TESTS_SUPPORT_SCOPED_ENV_H_
