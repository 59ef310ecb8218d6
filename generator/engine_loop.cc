#include "generator/engine_loop.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::generator {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine)
    : engine_(std::move(engine)), thread_([this] { Run(); }) {}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

int64_t EngineLoop::Submit(Request request, RequestCallbacks callbacks) {
  int64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    submissions_.push_back({ticket, std::move(request), std::move(callbacks)});
    ++status_.num_requests;
  }
  wake_.notify_all();
  return ticket;
}

void EngineLoop::Cancel(int64_t ticket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(ticket);
  }
  wake_.notify_all();
}

EngineLoopStatus EngineLoop::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

absl::Status EngineLoop::InstallWeights(TensorMap state, int64_t version) {
  absl::Status s = engine_->InstallWeights(std::move(state), version);
  wake_.notify_all();
  return s;
}

absl::StatusOr<double> EngineLoop::SwapWeights(TensorMap state, int64_t version) {
  // The expensive part (checks, casts) here, while the loop keeps generating.
  absl::StatusOr<Engine::PreparedWeights> prepared =
      engine_->PrepareWeights(std::move(state), version);
  if (!prepared.ok()) return prepared.status();
  auto done = std::make_shared<std::promise<absl::StatusOr<SwapResult>>>();
  std::future<absl::StatusOr<SwapResult>> applied = done->get_future();
  std::optional<PendingSwap> replaced;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("generator is shutting down");
    replaced.swap(swap_);
    swap_ = PendingSwap{*std::move(prepared), std::move(done)};
  }
  if (replaced.has_value()) {
    replaced->done->set_value(absl::AbortedError(
        absl::StrCat("weights version ", replaced->prepared.version, " were replaced by version ",
                     version, " before they were applied")));
  }
  wake_.notify_all();
  absl::StatusOr<SwapResult> result = applied.get();
  if (!result.ok()) return result.status();
  return result->pause_ms;  // the old weights are freed here, off the loop thread
}

void EngineLoop::ApplySwap(PendingSwap swap) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Transformer::ReleasedWeights> released =
      engine_->ApplyPreparedWeights(std::move(swap.prepared));
  const double pause_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  PublishStatus();  // status() shows the new version by the time SwapWeights returns
  if (released.ok()) {
    swap.done->set_value(SwapResult{pause_ms, *std::move(released)});
  } else {
    swap.done->set_value(released.status());
  }
}

void EngineLoop::Run() {
  PublishStatus();
  while (true) {
    std::vector<Submission> submissions;
    std::vector<int64_t> cancels;
    std::optional<PendingSwap> swap;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Sleep only when there is nothing to admit, cancel or step.
      wake_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !submissions_.empty() || !cancels_.empty() || swap_.has_value() ||
               engine_->HasUnfinished();
      });
      submissions.swap(submissions_);
      cancels.swap(cancels_);
      swap.swap(swap_);
      stopping = stopping_;
    }
    AdmitSubmissions(std::move(submissions));  // before cancels: a ticket may be cancelled at once
    ApplyCancels(cancels);
    if (swap.has_value()) {
      if (stopping) {
        swap->done->set_value(absl::UnavailableError("generator is shutting down"));
      } else {
        ApplySwap(*std::move(swap));
      }
    }
    if (stopping) {
      FailAll(absl::UnavailableError("generator is shutting down"));
      PublishStatus();
      return;
    }
    if (engine_->HasUnfinished()) StepOnce();
    PublishStatus();
  }
}

void EngineLoop::AdmitSubmissions(std::vector<Submission> submissions) {
  for (Submission& submission : submissions) {
    absl::StatusOr<int64_t> id = engine_->AddRequest(submission.request);
    if (!id.ok()) {
      submission.callbacks.on_done(id.status());
      continue;
    }
    request_of_ticket_[submission.ticket] = *id;
    active_[*id] = Active{submission.ticket, submission.request.n, std::move(submission.callbacks)};
  }
}

void EngineLoop::ApplyCancels(const std::vector<int64_t>& tickets) {
  for (int64_t ticket : tickets) {
    auto it = request_of_ticket_.find(ticket);
    if (it == request_of_ticket_.end()) continue;  // done already (or rejected)
    const int64_t id = it->second;
    request_of_ticket_.erase(it);
    engine_->Abort(id);  // frees the blocks now; the aborted samples are dropped in StepOnce
    auto active = active_.find(id);
    RequestCallbacks callbacks = std::move(active->second.callbacks);
    active_.erase(active);
    callbacks.on_done(absl::CancelledError("request cancelled"));
  }
}

void EngineLoop::StepOnce() {
  absl::StatusOr<std::vector<SampleOutput>> finished = engine_->Step();
  if (!finished.ok()) {
    FailAll(finished.status());
    return;
  }
  for (SampleOutput& sample : *finished) {
    auto it = active_.find(sample.request_id);
    if (it == active_.end()) continue;  // a cancelled request's aborted sample
    it->second.callbacks.on_sample(std::move(sample));
    if (--it->second.num_remaining == 0) {
      RequestCallbacks callbacks = std::move(it->second.callbacks);
      request_of_ticket_.erase(it->second.ticket);
      active_.erase(it);
      callbacks.on_done(absl::OkStatus());
    }
  }
}

void EngineLoop::FailAll(const absl::Status& status) {
  std::map<int64_t, Active> active;
  active.swap(active_);
  request_of_ticket_.clear();
  for (auto& [id, request] : active) {
    engine_->Abort(id);
    request.callbacks.on_done(status);
  }
  // Drain the aborted samples so that the engine holds no blocks.
  while (engine_->HasUnfinished()) {
    if (!engine_->Step().ok()) break;
  }
}

void EngineLoop::PublishStatus() {
  EngineLoopStatus snapshot;
  snapshot.weight_version = engine_->weight_version();
  snapshot.num_running = engine_->num_running();
  snapshot.num_waiting = engine_->num_waiting();
  snapshot.num_kv_blocks = engine_->block_manager().num_blocks();
  snapshot.num_kv_blocks_free = engine_->block_manager().num_free_blocks();
  std::lock_guard<std::mutex> lock(mu_);
  // Requests submitted but not yet admitted count too.
  snapshot.num_requests = static_cast<int64_t>(active_.size() + submissions_.size());
  status_ = snapshot;
}

}  // namespace lockstep::generator
