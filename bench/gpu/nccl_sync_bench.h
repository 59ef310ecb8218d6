// bench_gpu's sync figures: device copy bandwidth (cudaMemcpy device to device, the bound a
// same-GPU cuda_ipc hand-over works against: a pack copy and a receiver copy per byte) and, with
// two or more GPUs, the NCCL broadcast of the weight sync's raw layer (NcclCommunicator, one
// thread per GPU, the same nonblocking, deadline-bounded path NcclBucketTransport uses) in GB/s.
// Without NCCL in the build, or with one GPU, the NCCL entry says why it was skipped.
#ifndef LOCKSTEP_BENCH_GPU_NCCL_SYNC_BENCH_H_
#define LOCKSTEP_BENCH_GPU_NCCL_SYNC_BENCH_H_

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu/gpu_bench_util.h"

#ifdef LOCKSTEP_BENCH_HAVE_NCCL
#include "absl/time/clock.h"
#include "weight_sync/nccl_broadcast.h"
#endif

namespace lockstep::bench_gpu {

#ifdef LOCKSTEP_BENCH_HAVE_NCCL
// Seconds of one broadcast of `bytes` from GPU 0 to GPUs 1..num_gpus-1 (the slowest rank's time,
// after one warm-up broadcast), or a negative value with `error` set.
inline double NcclBroadcastSeconds(int num_gpus, size_t bytes, std::string& error) {
  absl::StatusOr<std::string> id = weight_sync::NcclUniqueIdBytes();
  if (!id.ok()) {
    error = std::string(id.status().message());
    return -1;
  }
  std::vector<double> seconds(num_gpus, -1);
  std::vector<std::string> errors(num_gpus);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < num_gpus; ++rank) {
    ranks.emplace_back([&, rank] {
      CheckCuda(cudaSetDevice(rank), "cudaSetDevice");
      auto communicator = weight_sync::NcclCommunicator::Create(
          *id, rank, num_gpus, absl::Now() + absl::Seconds(60));
      if (!communicator.ok()) {
        errors[rank] = std::string(communicator.status().message());
        return;
      }
      DeviceMemory buffer(bytes);
      cudaStream_t stream;
      CheckCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
      double best = 1e30;
      for (int round = 0; round < 4; ++round) {  // round 0 is the warm-up
        const auto start = std::chrono::steady_clock::now();
        absl::Status status = (*communicator)->Broadcast(buffer.as<void>(), bytes, 0, stream,
                                                         absl::Now() + absl::Seconds(60));
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!status.ok()) {
          errors[rank] = std::string(status.message());
          break;
        }
        if (round > 0) best = std::min(best, elapsed);
      }
      if (errors[rank].empty()) {
        absl::Status closed = (*communicator)->Close(absl::Now() + absl::Seconds(60));
        if (!closed.ok()) errors[rank] = std::string(closed.message());
      }
      cudaStreamDestroy(stream);
      seconds[rank] = best;
    });
  }
  for (std::thread& rank : ranks) rank.join();
  double slowest = 0;
  for (int rank = 0; rank < num_gpus; ++rank) {
    if (!errors[rank].empty()) {
      error = "rank " + std::to_string(rank) + ": " + errors[rank];
      return -1;
    }
    slowest = std::max(slowest, seconds[rank]);
  }
  return slowest;
}
#endif

inline nlohmann::json BenchSync(cudaStream_t stream, int num_gpus, int64_t bytes) {
  nlohmann::json sync;
  const double copy_ms = CopyMs(stream, 2 * static_cast<size_t>(bytes));  // copies `bytes`
  sync["bytes"] = bytes;
  sync["device_copy_gbps"] = bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("device copy        %lld bytes  %8.1f GB/s\n", static_cast<long long>(bytes),
              sync["device_copy_gbps"].get<double>());
#ifdef LOCKSTEP_BENCH_HAVE_NCCL
  if (num_gpus < 2) {
    sync["nccl"] = {{"skipped", "needs 2 or more GPUs, " + std::to_string(num_gpus) + " visible"}};
  } else {
    std::string error;
    const double seconds = NcclBroadcastSeconds(num_gpus, static_cast<size_t>(bytes), error);
    if (seconds < 0) {
      sync["nccl"] = {{"error", error}};
      std::printf("nccl broadcast     failed: %s\n", error.c_str());
    } else {
      const double gbps = bytes / seconds / 1e9;
      sync["nccl"] = {{"gpus", num_gpus}, {"seconds", seconds}, {"gbps", gbps},
                      {"ratio_to_device_copy", gbps / sync["device_copy_gbps"].get<double>()}};
      std::printf("nccl broadcast     %d GPUs  %8.1f GB/s (%.2f of device copy)\n", num_gpus, gbps,
                  gbps / sync["device_copy_gbps"].get<double>());
    }
  }
#else
  (void)num_gpus;
  sync["nccl"] = {{"skipped", "built without NCCL"}};
#endif
  sync["cuda_ipc"] = {
      {"skipped",
       "needs a second process: tests/gpu/gpu_transports_test checks it; its per-byte work is "
       "two device copies (pack into the slot, copy out), bounded by device_copy_gbps / 2"}};
  return sync;
}

}  // namespace lockstep::bench_gpu

#endif  // LOCKSTEP_BENCH_GPU_NCCL_SYNC_BENCH_H_
