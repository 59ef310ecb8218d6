// EngineLoop: one thread that owns an Engine, so that any number of threads (gRPC handlers) can
// submit requests. Submissions and cancellations go through a queue; the loop thread applies
// them between steps, steps while there is work, and hands each finished sample to its
// request's callbacks.
//
//   EngineLoop loop(std::move(engine));
//   int64_t ticket = loop.Submit(request, {.on_sample = ..., .on_done = ...});
//   loop.Cancel(ticket);  // optional: aborts the samples still running, frees their blocks
//   absl::StatusOr<double> pause_ms = loop.SwapWeights(staged, version);  // between two steps
//
// Callbacks run on the loop thread and must not block for long or call back into the loop
// while holding their own locks that the submitter holds too.
#ifndef LOCKSTEP_GENERATOR_ENGINE_LOOP_H_
#define LOCKSTEP_GENERATOR_ENGINE_LOOP_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "generator/engine.h"

namespace lockstep::generator {

struct RequestCallbacks {
  // Once per finished sample (never for samples of a cancelled request).
  std::function<void(SampleOutput)> on_sample;
  // Exactly once, last: OK after all n samples; InvalidArgument if the engine rejected the
  // request; Cancelled after Cancel; Unavailable when the loop shuts down first; or the
  // engine's error if a step failed.
  std::function<void(absl::Status)> on_done;
};

// A snapshot of the engine, refreshed by the loop thread after every pass.
struct EngineLoopStatus {
  int64_t weight_version = 0;
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t num_kv_blocks = 0;
  int64_t num_kv_blocks_free = 0;
  int64_t num_requests = 0;  // submitted and not yet done
};

class EngineLoop {
 public:
  // Takes ownership of `engine` and starts the loop thread.
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  // Shuts down: requests not yet done get on_done(Unavailable); joins the thread.
  ~EngineLoop();

  // Queues a request; returns its ticket. Validation happens on the loop thread: a rejected
  // request gets on_done(InvalidArgument) with the engine's message. Thread-safe.
  int64_t Submit(Request request, RequestCallbacks callbacks);

  // Aborts the ticket's request if it is not done yet (its on_done gets Cancelled); a no-op
  // otherwise. Thread-safe.
  void Cancel(int64_t ticket);

  // Thread-safe.
  EngineLoopStatus status() const;

  // The engine's current weights and their version (Engine::WeightsSnapshot). Thread-safe.
  std::pair<int64_t, TensorMap> WeightsSnapshot() const { return engine_->WeightsSnapshot(); }

  // Stages weights on the engine (Engine::InstallWeights is thread-safe). Thread-safe.
  absl::Status InstallWeights(TensorMap state, int64_t version);

  // Prepares `state` on the calling thread (Engine::PrepareWeights: checks and dtype cast,
  // while the loop keeps stepping), hands it to the loop thread, which swaps
  // it in by pointer between two engine steps, and blocks until it did; the previous weights are
  // freed on the calling thread too. Returns the milliseconds the loop thread spent on the swap:
  // the generation stall it caused (requests in flight continue afterwards; their later tokens
  // carry `version`). InvalidArgument (nothing applied) when the engine rejects the tensors;
  // Aborted when a later SwapWeights replaced this one before it was applied; Unavailable when
  // the loop shuts down first. The tensors become the engine's parameters: the caller must not
  // change them afterwards. Thread-safe; must not be called from a callback.
  absl::StatusOr<double> SwapWeights(TensorMap state, int64_t version);

 private:
  struct Submission {
    int64_t ticket;
    Request request;
    RequestCallbacks callbacks;
  };
  struct Active {  // loop thread only
    int64_t ticket;
    int64_t num_remaining;
    RequestCallbacks callbacks;
  };

  struct SwapResult {
    double pause_ms = 0;
    Transformer::ReleasedWeights released;  // freed by the SwapWeights caller
  };
  struct PendingSwap {
    Engine::PreparedWeights prepared;
    std::shared_ptr<std::promise<absl::StatusOr<SwapResult>>> done;
  };

  void Run();
  // Loop thread: applies the prepared swap, timing it.
  void ApplySwap(PendingSwap swap);
  // Loop-thread helpers.
  void AdmitSubmissions(std::vector<Submission> submissions);
  void ApplyCancels(const std::vector<int64_t>& tickets);
  void StepOnce();
  void FailAll(const absl::Status& status);
  void PublishStatus();

  const std::unique_ptr<Engine> engine_;
  std::map<int64_t, Active> active_;              // by engine request id; loop thread only
  std::map<int64_t, int64_t> request_of_ticket_;  // loop thread only

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Submission> submissions_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> cancels_ ABSL_GUARDED_BY(mu_);
  std::optional<PendingSwap> swap_ ABSL_GUARDED_BY(mu_);
  EngineLoopStatus status_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_ENGINE_LOOP_H_
