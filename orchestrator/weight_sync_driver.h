// Driving weight sync from the orchestrator (protocol in proto/weight_sync.proto): form the
// group {trainer rank 0, generators 1..N} with concurrent JoinWeightSync calls (the generators'
// once the trainer's store accepts connections), then per version
// run Trainer.PublishWeights(v) and Generator.ReceiveWeights(v) on every generator concurrently.
// Weights travel over the c10d group, never through this process.
//
// Thread safety: free functions; the clients are thread-safe. Call one at a time per group.
#ifndef LOCKSTEP_ORCHESTRATOR_WEIGHT_SYNC_DRIVER_H_
#define LOCKSTEP_ORCHESTRATOR_WEIGHT_SYNC_DRIVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/trainer_client.h"

namespace lockstep::orchestrator {

struct WeightSyncGroupOptions {
  std::string store_host = "127.0.0.1";
  int store_port = 0;            // the trainer hosts the TCPStore here; must be free
  std::string group_name = "sync-0";
  int64_t timeout_ms = 60000;    // every collective of the group
  int64_t bucket_bytes = 0;      // 0 = the services' default
  bool verify = false;
  v1::WeightSyncTransport transport = v1::WEIGHT_SYNC_TRANSPORT_AUTO;
};

// Forms the group. Errors name the service that failed first (e.g. a generator whose model
// differs: FAILED_PRECONDITION naming the tensor).
absl::StatusOr<v1::JoinWeightSyncResponse> FormWeightSyncGroup(
    TrainerClient& trainer, const std::vector<GeneratorClient*>& generators,
    const WeightSyncGroupOptions& options);

struct SyncFigures {
  int64_t version = 0;
  int64_t bytes = 0;
  double seconds = 0;            // wall time of the whole sync, as the loop sees it
  double trainer_seconds = 0;    // wall time of Trainer.PublishWeights alone (the rest of
                                 // `seconds` is generators receiving and swapping after it)
  double max_swap_pause_ms = 0;  // the longest generator stall
};

// Publishes `version` to every generator. Returns once every generator holds it.
absl::StatusOr<SyncFigures> SyncWeights(TrainerClient& trainer,
                                        const std::vector<GeneratorClient*>& generators,
                                        int64_t version, absl::Duration timeout);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_WEIGHT_SYNC_DRIVER_H_
