// A real `lockstep serve sandbox` service for tests: SandboxService over the shared real sandbox
// (sandbox_test_util.h), serving on 127.0.0.1:<any free port> through common/server.h, as the
// CLI does, and clients of it.
#ifndef LOCKSTEP_TESTS_SANDBOX_SERVED_SANDBOX_H_
#define LOCKSTEP_TESTS_SANDBOX_SERVED_SANDBOX_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/server.h"
#include "gtest/gtest.h"
#include "sandbox/sandbox_client.h"
#include "sandbox/sandbox_service.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox::testing {

inline constexpr char kToken[] = "the-jobs-token";

// A SandboxService over the shared real sandbox, serving on 127.0.0.1:<any port>.
class ServedSandbox {
 public:
  explicit ServedSandbox(SandboxServiceOptions options) {
    absl::StatusOr<std::unique_ptr<SandboxService>> service = SandboxService::Create(
        std::shared_ptr<Executor>(&SharedSandbox(true), [](Executor*) {}), options);
    EXPECT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    absl::StatusOr<RunningServer> running = StartServer({.port = 0}, {service_.get()});
    EXPECT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
  }
  ~ServedSandbox() {
    running_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    running_.server->Wait();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", running_.port); }
  SandboxService& service() { return *service_; }

  std::unique_ptr<SandboxClient> Client(std::string token, int max_attempts = 1) const {
    SandboxClientOptions options;
    options.address = address();
    options.auth_token = std::move(token);
    options.max_attempts = max_attempts;
    absl::StatusOr<std::unique_ptr<SandboxClient>> client = SandboxClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

 private:
  std::unique_ptr<SandboxService> service_;  // outlives the server (declared first)
  RunningServer running_;
};

}  // namespace lockstep::sandbox::testing

#endif  // LOCKSTEP_TESTS_SANDBOX_SERVED_SANDBOX_H_
