// gRPC adapter that serves an Executor (normally the in-process Sandbox) as lockstep.v1.Sandbox
// (proto/sandbox.proto): `lockstep serve sandbox`. Each call is checked (token), converted,
// handed to a common/ WorkQueue (at most max_concurrency programs at once, at most max_queue
// calls waiting; a call beyond that fails at once with RESOURCE_EXHAUSTED), run, converted
// back and finished. gRPC's own threads never run a program.
//
//   SandboxService service(sandbox, {.token = token, .max_concurrency = 2, .max_queue = 8});
//   StartServer({.port = 0}, {&service});
#ifndef LOCKSTEP_SANDBOX_SANDBOX_SERVICE_H_
#define LOCKSTEP_SANDBOX_SANDBOX_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/sandbox.grpc.pb.h"
#include "common/work_queue.h"
#include "sandbox/executor.h"

namespace lockstep::sandbox {

struct SandboxServiceOptions {
  // When non-empty, every call must carry "authorization: Bearer <token>"; others fail with
  // UNAUTHENTICATED before anything runs.
  std::string token;
  int max_concurrency = 2;  // programs running at once; >= 1
  int max_queue = 16;       // calls waiting for a free slot at most; >= 0
};

class SandboxService final : public v1::Sandbox::CallbackService {
 public:
  // InvalidArgument naming the option; `executor` must not be null.
  static absl::StatusOr<std::unique_ptr<SandboxService>> Create(
      std::shared_ptr<Executor> executor, SandboxServiceOptions options);

  // Waits for the calls already accepted (each ends within its wall-clock limit; calls the
  // client cancelled while waiting finish CANCELLED without running). Destroy the service only
  // after the server it was registered with has shut down.
  ~SandboxService() override = default;

  // Thread safety: called concurrently by gRPC.
  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* context,
                                    const v1::ExecuteRequest* request,
                                    v1::ExecuteResponse* response) override;

  // Counters of the queue: running, queued, accepted, rejected (RESOURCE_EXHAUSTED), completed
  // (counted after the reply went out).
  WorkQueueStats stats() const { return queue_.stats(); }
  // Programs the executor ran to a result, counted before their reply is sent: a client that
  // has its result sees it counted.
  int64_t num_executed() const { return num_executed_.load(); }
  const SandboxServiceOptions& options() const { return options_; }

 private:
  SandboxService(std::shared_ptr<Executor> executor, SandboxServiceOptions options);

  // Runs one accepted call on a queue worker and finishes it.
  void RunCall(grpc::CallbackServerContext* context, const v1::ExecuteRequest* request,
               v1::ExecuteResponse* response, grpc::ServerUnaryReactor* reactor,
               double queue_ms) const;

  const std::shared_ptr<Executor> executor_;
  const SandboxServiceOptions options_;
  mutable std::atomic<int64_t> num_executed_{0};
  // Last member: destroyed (joined) first, while executor_ is still alive.
  WorkQueue queue_;
};

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_SANDBOX_SERVICE_H_
