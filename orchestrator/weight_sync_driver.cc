#include "orchestrator/weight_sync_driver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::orchestrator {
namespace {

// Runs `generator_call(i)` for every generator on its own thread and `trainer_call()` here;
// returns the first error in the order trainer, generator 0, 1, ...
template <typename T, typename G, typename TrainerFn, typename GeneratorFn>
absl::Status RunConcurrently(size_t num_generators, TrainerFn trainer_call,
                             GeneratorFn generator_call, std::optional<absl::StatusOr<T>>* trainer,
                             std::vector<std::optional<absl::StatusOr<G>>>* generators) {
  generators->assign(num_generators, std::nullopt);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < num_generators; ++i) {
    threads.emplace_back([&, i] { (*generators)[i] = generator_call(i); });
  }
  *trainer = trainer_call();
  for (std::thread& thread : threads) thread.join();
  // The first error, with the others' after it: a trainer timing out is often the echo of a
  // generator that refused or failed at once.
  absl::Status first;
  std::string others;
  auto note = [&](const absl::Status& status) {
    if (status.ok()) return;
    if (first.ok()) {
      first = status;
    } else {
      absl::StrAppend(&others, others.empty() ? "" : "; ", status.message());
    }
  };
  note((*trainer)->status());
  for (const auto& result : *generators) note(result->status());
  if (first.ok() || others.empty()) return first;
  return absl::Status(first.code(), absl::StrCat(first.message(), " (also: ", others, ")"));
}

// Waits until something accepts TCP connections at host:port (the trainer's store, which it
// starts in its JoinWeightSync), checking every 5 ms, or until `deadline`. A host that is not
// an IPv4 address is not waited for.
void WaitUntilListening(const std::string& host, int port, absl::Time deadline) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) return;
  while (absl::Now() < deadline) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    const bool accepted =
        connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
    close(fd);
    if (accepted) return;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace

absl::StatusOr<v1::JoinWeightSyncResponse> FormWeightSyncGroup(
    TrainerClient& trainer, const std::vector<GeneratorClient*>& generators,
    const WeightSyncGroupOptions& options) {
  v1::JoinWeightSyncRequest request;
  request.set_store_host(options.store_host);
  request.set_store_port(options.store_port);
  request.set_world_size(1 + static_cast<int32_t>(generators.size()));
  request.set_group_name(options.group_name);
  request.set_timeout_ms(options.timeout_ms);
  request.set_bucket_bytes(options.bucket_bytes);
  request.set_verify(options.verify);
  request.set_transport(options.transport);
  // The RPC returns once the group is formed; allow the rendezvous timeout plus a margin.
  const absl::Duration timeout = absl::Milliseconds(options.timeout_ms) + absl::Seconds(10);
  const absl::Time store_deadline = absl::Now() + absl::Seconds(5);
  std::optional<absl::StatusOr<v1::JoinWeightSyncResponse>> trainer_result;
  std::vector<std::optional<absl::StatusOr<v1::JoinWeightSyncResponse>>> generator_results;
  absl::Status status = RunConcurrently<v1::JoinWeightSyncResponse, v1::JoinWeightSyncResponse>(
      generators.size(),
      [&] {
        v1::JoinWeightSyncRequest mine = request;
        mine.set_rank(0);
        return trainer.JoinWeightSync(mine, timeout);
      },
      [&](size_t i) {
        // The generators dial the trainer's store once it listens: c10d retries a refused
        // connection only after a second, which a re-formed group would otherwise always wait.
        WaitUntilListening(options.store_host, options.store_port, store_deadline);
        v1::JoinWeightSyncRequest mine = request;
        mine.set_rank(static_cast<int32_t>(i + 1));
        return generators[i]->JoinWeightSync(mine, timeout);
      },
      &trainer_result, &generator_results);
  if (!status.ok()) return status;
  return **trainer_result;
}

absl::StatusOr<SyncFigures> SyncWeights(TrainerClient& trainer,
                                        const std::vector<GeneratorClient*>& generators,
                                        int64_t version, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  absl::Time trainer_done = start;
  std::optional<absl::StatusOr<v1::WeightSyncResponse>> trainer_result;
  std::vector<std::optional<absl::StatusOr<v1::WeightSyncResponse>>> generator_results;
  absl::Status status = RunConcurrently<v1::WeightSyncResponse, v1::WeightSyncResponse>(
      generators.size(),
      [&] {
        absl::StatusOr<v1::WeightSyncResponse> published = trainer.PublishWeights(version, timeout);
        trainer_done = absl::Now();
        return published;
      },
      [&](size_t i) { return generators[i]->ReceiveWeights(version, timeout); }, &trainer_result,
      &generator_results);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("weight sync of version ", version, ": ", status.message()));
  }
  SyncFigures figures;
  figures.version = version;
  figures.bytes = (*trainer_result)->bytes();
  figures.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  figures.trainer_seconds = absl::ToDoubleSeconds(trainer_done - start);
  for (const auto& result : generator_results) {
    figures.max_swap_pause_ms = std::max(figures.max_swap_pause_ms, (*result)->swap_pause_ms());
  }
  return figures;
}

}  // namespace lockstep::orchestrator
