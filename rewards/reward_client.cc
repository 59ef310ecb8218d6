#include "rewards/reward_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "proto/reward.grpc.pb.h"
#include "rewards/reward_convert.h"
#include "rewards/rpc_retry.h"

namespace lockstep::rewards {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status ValidateOptions(const ClientOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("reward client: address is empty");
  if (options.deadline.count() <= 0) {
    return absl::InvalidArgumentError("reward client: deadline must be > 0");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("reward client: max_attempts must be >= 1");
  }
  if (options.initial_backoff.count() < 0) {
    return absl::InvalidArgumentError("reward client: initial_backoff must be >= 0");
  }
  if (!(options.backoff_multiplier >= 1)) {
    return absl::InvalidArgumentError("reward client: backoff_multiplier must be >= 1");
  }
  if (options.max_concurrency < 1) {
    return absl::InvalidArgumentError("reward client: max_concurrency must be >= 1");
  }
  if (options.max_batch_items < 1) {
    return absl::InvalidArgumentError("reward client: max_batch_items must be >= 1");
  }
  return absl::OkStatus();
}

// One ScoreAsync call: its outcomes fill in as its batches finish.
struct PendingScore {
  std::vector<ItemOutcome> outcomes;
  int num_batches_left = 0;
  ScoreDoneCallback done;
};

// Up to max_batch_items consecutive items of one PendingScore, sent as one Score call.
struct Batch {
  std::shared_ptr<PendingScore> pending;
  size_t first_item = 0;  // index of the batch's first item in pending->outcomes
  v1::ScoreRequest request;
  int num_attempts = 0;  // attempts started so far
};

// One attempt in flight. gRPC needs the context and response alive until the callback runs.
struct Call {
  std::unique_ptr<Batch> batch;
  grpc::ClientContext context;
  v1::ScoreResponse response;
  grpc::Status status;
};

}  // namespace

class RewardClient::Impl {
 public:
  Impl(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
      : options_(std::move(options)), stub_(v1::Reward::NewStub(std::move(channel))) {
    dispatcher_ = std::thread([this] { DispatchLoop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (Call* call : in_flight_) call->context.TryCancel();
    }
    wake_.notify_all();
    dispatcher_.join();
  }

  const ClientOptions& options() const { return options_; }

  void ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) {
    auto pending = std::make_shared<PendingScore>();
    pending->outcomes.resize(items.size());
    pending->done = std::move(done);
    std::vector<std::unique_ptr<Batch>> batches;
    const size_t batch_size = static_cast<size_t>(options_.max_batch_items);
    for (size_t first = 0; first < items.size(); first += batch_size) {
      auto batch = std::make_unique<Batch>();
      batch->pending = pending;
      batch->first_item = first;
      const size_t end = std::min(items.size(), first + batch_size);
      for (size_t i = first; i < end; ++i) {
        ToProto(items[i], std::to_string(i - first), batch->request.add_items());
      }
      batches.push_back(std::move(batch));
    }
    pending->num_batches_left = static_cast<int>(batches.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      metrics_.items_sent += static_cast<int64_t>(items.size());
      metrics_.items_in_flight += static_cast<int64_t>(items.size());
      if (batches.empty()) {
        // Nothing to send; still answer from the dispatcher thread, never from this one.
        empty_.push_back(std::move(pending));
      }
      for (auto& batch : batches) ready_.push_back(std::move(batch));
    }
    wake_.notify_one();
  }

  ClientMetrics metrics() const {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_;
  }

 private:
  // The dispatcher: starts ready batches within the concurrency limit, moves retries out of
  // backoff when due, and turns finished calls into outcomes. Callbacks run here, unlocked.
  void DispatchLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      const Clock::time_point now = Clock::now();
      while (!backoff_.empty() && (backoff_.begin()->first <= now || stopping_)) {
        // Retries go first: they are the oldest work.
        ready_.push_front(std::move(backoff_.begin()->second));
        backoff_.erase(backoff_.begin());
      }
      if (!finished_.empty() || !empty_.empty()) {
        std::deque<std::unique_ptr<Call>> finished = std::move(finished_);
        finished_.clear();
        std::deque<std::shared_ptr<PendingScore>> empty = std::move(empty_);
        empty_.clear();
        lock.unlock();
        for (auto& pending : empty) pending->done({});
        for (auto& call : finished) Finish(std::move(call));
        lock.lock();
        continue;
      }
      if (stopping_ && !ready_.empty()) {
        std::deque<std::unique_ptr<Batch>> abandoned = std::move(ready_);
        ready_.clear();
        lock.unlock();
        for (auto& batch : abandoned) {
          FailBatch(std::move(batch), "reward client shut down before the batch was sent");
        }
        lock.lock();
        continue;
      }
      if (stopping_ && in_flight_.empty()) return;
      if (!ready_.empty() && static_cast<int>(in_flight_.size()) < options_.max_concurrency) {
        auto call = std::make_unique<Call>();
        call->batch = std::move(ready_.front());
        ready_.pop_front();
        Call* registered = Register(std::move(call));
        // Started unlocked: gRPC may run the completion callback (which takes mu_) at once.
        lock.unlock();
        Start(registered);
        lock.lock();
        continue;
      }
      if (backoff_.empty()) {
        wake_.wait(lock);
      } else {
        wake_.wait_until(lock, backoff_.begin()->first);
      }
    }
  }

  // Counts one attempt and adds it to in_flight_ (so that shutdown can cancel it), before it is
  // started.
  Call* Register(std::unique_ptr<Call> call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Batch& batch = *call->batch;
    ++batch.num_attempts;
    ++metrics_.rpcs;
    if (batch.num_attempts > 1) ++metrics_.retries;
    call->context.set_deadline(std::chrono::system_clock::now() + options_.deadline);
    AttachAuthToken(&call->context, options_.auth_token);
    Call* raw = call.release();
    in_flight_.insert(raw);
    metrics_.max_concurrent_rpcs =
        std::max(metrics_.max_concurrent_rpcs, static_cast<int64_t>(in_flight_.size()));
    return raw;
  }

  // Starts a registered attempt; its completion goes to finished_ for the dispatcher. A call
  // cancelled (TryCancel) before it starts is cancelled as it starts.
  void Start(Call* call) ABSL_LOCKS_EXCLUDED(mu_) {
    stub_->async()->Score(&call->context, &call->batch->request, &call->response,
                          [this, call](grpc::Status status) {
                            std::lock_guard<std::mutex> callback_lock(mu_);
                            call->status = std::move(status);
                            in_flight_.erase(call);
                            finished_.emplace_back(call);
                            wake_.notify_one();
                          });
  }

  // Turns one finished attempt into outcomes, or schedules its retry.
  void Finish(std::unique_ptr<Call> call) {
    const grpc::Status& status = call->status;
    std::unique_ptr<Batch> batch = std::move(call->batch);
    if (!status.ok()) {
      bool retry = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++metrics_.rpcs_failed;
        if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
          ++metrics_.deadline_exceeded;
        }
        retry = !stopping_ && IsRetryable(status.error_code()) &&
                batch->num_attempts < options_.max_attempts;
        if (retry) {
          const Clock::time_point due =
              Clock::now() +
              Backoff(options_.initial_backoff, options_.backoff_multiplier, batch->num_attempts);
          backoff_.emplace(due, std::move(batch));
        }
      }
      if (!retry) {
        const int num_attempts = batch->num_attempts;
        std::string reason = absl::StrCat(DescribeStatus(status), " (after ", num_attempts,
                                          num_attempts == 1 ? " attempt)" : " attempts)");
        FailBatch(std::move(batch), reason);
      }
      return;
    }
    const v1::ScoreResponse& response = call->response;
    const int num_items = batch->request.items_size();
    if (response.scores_size() != num_items) {
      FailBatch(std::move(batch), absl::StrCat("the server returned ", response.scores_size(),
                                               " scores for ", num_items, " items"));
      return;
    }
    for (int i = 0; i < num_items; ++i) {
      const std::string& id = response.scores(i).id();
      if (!id.empty() && id != batch->request.items(i).id()) {
        FailBatch(std::move(batch), absl::StrCat("score ", i, " has id '", id, "', expected '",
                                                 batch->request.items(i).id(),
                                                 "' (scores must come in request order)"));
        return;
      }
    }
    std::vector<ItemOutcome>& outcomes = batch->pending->outcomes;
    for (int i = 0; i < num_items; ++i) {
      const v1::ItemScore& score = response.scores(i);
      ItemOutcome& outcome = outcomes[batch->first_item + i];
      if (score.has_error()) {
        outcome.error = Describe(absl::StrCat("item error: ", score.error()));
      } else if (!std::isfinite(score.reward())) {
        outcome.error = Describe(absl::StrCat("non-finite reward ", score.reward()));
      } else {
        outcome.ok = true;
        outcome.reward = score.reward();
        outcome.sub_scores.insert(score.sub_scores().begin(), score.sub_scores().end());
      }
    }
    BatchDone(std::move(batch));
  }

  void FailBatch(std::unique_ptr<Batch> batch, const std::string& reason) {
    const std::string error = Describe(reason);
    std::vector<ItemOutcome>& outcomes = batch->pending->outcomes;
    for (int i = 0; i < batch->request.items_size(); ++i) {
      ItemOutcome& outcome = outcomes[batch->first_item + i];
      outcome = ItemOutcome();
      outcome.error = error;
    }
    BatchDone(std::move(batch));
  }

  // Counts the batch's items and, when it was the last batch of its ScoreAsync, runs `done`.
  void BatchDone(std::unique_ptr<Batch> batch) {
    std::shared_ptr<PendingScore> pending = std::move(batch->pending);
    if (--pending->num_batches_left > 0) return;
    int64_t num_scored = 0;
    for (const ItemOutcome& outcome : pending->outcomes) num_scored += outcome.ok ? 1 : 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto num_items = static_cast<int64_t>(pending->outcomes.size());
      metrics_.items_scored += num_scored;
      metrics_.items_failed += num_items - num_scored;
      metrics_.items_in_flight -= num_items;
    }
    pending->done(std::move(pending->outcomes));
  }

  std::string Describe(absl::string_view reason) const {
    return absl::StrCat("reward server ", options_.address, ": ", reason);
  }

  const ClientOptions options_;
  const std::unique_ptr<v1::Reward::Stub> stub_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Batch>> ready_ ABSL_GUARDED_BY(mu_);
  std::multimap<Clock::time_point, std::unique_ptr<Batch>> backoff_ ABSL_GUARDED_BY(mu_);
  std::set<Call*> in_flight_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Call>> finished_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<PendingScore>> empty_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ClientMetrics metrics_ ABSL_GUARDED_BY(mu_);
  std::thread dispatcher_;
};

absl::StatusOr<std::unique_ptr<RewardClient>> RewardClient::Create(ClientOptions options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeRetryFriendlyChannel(options.address, options.tls_ca_file);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<RewardClient>(
      new RewardClient(std::make_unique<Impl>(std::move(options), *std::move(channel))));
}

RewardClient::RewardClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RewardClient::~RewardClient() = default;

std::string RewardClient::name() const {
  return absl::StrCat("reward server ", impl_->options().address);
}

void RewardClient::ScoreAsync(std::vector<RewardInput> items, ScoreDoneCallback done) {
  impl_->ScoreAsync(std::move(items), std::move(done));
}

ClientMetrics RewardClient::metrics() const { return impl_->metrics(); }

}  // namespace lockstep::rewards
