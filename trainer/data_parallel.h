// Data parallel training over c10d: every rank holds a full copy of the weights and the
// optimizer, trains on its share of the global batch, and the gradients are summed across ranks
// before each optimizer step, so that all ranks apply the same update and stay bit-identical.
//
// Ranks and the rendezvous address come from the environment that torchrun, Slurm or Kubernetes
// set: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE. Rank 0 hosts the c10d TCPStore. Only rank 0
// writes checkpoints (callers check IsCheckpointWriter()).
//
//   absl::StatusOr<DistributedEnv> env = DistributedEnvFromEnvironment();
//   auto reducer = DataParallelReducer::Create(*env, {});
//   auto trainer = Trainer::Create(model, options, reducer->get());   // world 1: pass nullptr
//   (*reducer)->BroadcastFromRankZero(params);                         // identical start
#ifndef LOCKSTEP_TRAINER_DATA_PARALLEL_H_
#define LOCKSTEP_TRAINER_DATA_PARALLEL_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/trainer.h"
#include "weight_sync/c10d_compat.h"

namespace lockstep::trainer {

struct DistributedEnv {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
};

// Reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE. None of them set: a single rank (rank 0
// of 1). Otherwise RANK and WORLD_SIZE are required, and MASTER_ADDR and MASTER_PORT too when
// WORLD_SIZE > 1. InvalidArgument naming the variable when one is missing or malformed (not an
// integer, port outside 1..65535, WORLD_SIZE < 1, RANK outside [0, WORLD_SIZE)).
absl::StatusOr<DistributedEnv> DistributedEnvFromEnvironment();

// The same, reading variables through `lookup` (nullopt = unset); for tests.
absl::StatusOr<DistributedEnv> ParseDistributedEnv(
    const std::function<std::optional<std::string>(const std::string&)>& lookup);

// True on the rank that writes checkpoints and publishes weights (rank 0).
inline bool IsCheckpointWriter(const DistributedEnv& env) { return env.rank == 0; }

struct DataParallelOptions {
  // Gradients are flattened into buckets of at most this many bytes (a larger tensor is a bucket
  // by itself) and each bucket is all-reduced with one collective.
  int64_t bucket_bytes = int64_t{25} << 20;
  // Rendezvous and every collective; a missing or dead peer fails the step after this long.
  std::chrono::milliseconds timeout{60000};
  std::string store_prefix = "lockstep-dp";
};

// GradientReducer over a Gloo (CPU) process group. Not thread-safe: the trainer calls it from
// the one thread that runs its steps, and every rank must make the same calls in the same order.
class DataParallelReducer final : public GradientReducer {
 public:
  // Joins the process group described by `env` (blocks until every rank arrives or the timeout).
  // InvalidArgument for bad options; DeadlineExceeded / Unavailable from the rendezvous.
  static absl::StatusOr<std::unique_ptr<DataParallelReducer>> Create(
      const DistributedEnv& env, const DataParallelOptions& options);

  // Sums `grads` across ranks in place. Buckets are formed in the order of `grads` (tensors of
  // one dtype together), so the layout, and each element's sum, is the same on every rank; all
  // ranks end with the same bits. Each call first checks (one 16-byte collective) that the ranks
  // agree on the layout (count, shapes, dtypes): FailedPrecondition if not. InvalidArgument for an
  // undefined or non-CPU gradient.
  absl::Status AllReduceSum(std::vector<torch::Tensor>& grads) override;

  // Sum of `value` over ranks (fp64).
  absl::StatusOr<double> AllReduceScalar(double value) override;

  // Overwrites `tensors` on every rank with rank 0's values (same bucketing as AllReduceSum).
  // Use once after loading weights so that all ranks start from the same bits.
  absl::Status BroadcastFromRankZero(std::vector<torch::Tensor>& tensors);

  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  // Buckets used by the last AllReduceSum / BroadcastFromRankZero.
  int64_t last_num_buckets() const { return last_num_buckets_; }

 private:
  DataParallelReducer(std::unique_ptr<c10d_compat::CollectiveGroup> group,
                      const DataParallelOptions& options);

  enum class Collective { kSum, kBroadcast };
  absl::Status RunBucketed(std::vector<torch::Tensor>& tensors, Collective collective);
  absl::Status CheckLayoutAgreed(const std::vector<torch::Tensor>& tensors);

  std::unique_ptr<c10d_compat::CollectiveGroup> group_;
  const DataParallelOptions options_;
  int64_t last_num_buckets_ = 0;
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_DATA_PARALLEL_H_
