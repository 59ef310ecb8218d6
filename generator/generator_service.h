// gRPC adapter that serves an EngineLoop as lockstep.v1.Generator (callback API). Generate
// converts the request, submits it to the loop and streams each sample as the loop delivers it;
// a cancelled stream cancels its request (its KV blocks are freed). GetStatus reads the loop's
// last snapshot; with with_weights_sha256 it also hashes the current weights (on the calling
// gRPC thread, ~1 s per GB).
//
// Weight sync (proto/weight_sync.proto): JoinWeightSync forms this generator's rank of the
// weight-sync group from the engine model's manifest; ReceiveWeights(v) receives the trainer's
// broadcast into a staging copy (in the model's dtype) while the engine keeps generating, then
// hands it to the engine loop, which swaps it in between two engine steps. ReceiveWeights
// finishes after the swap is applied (so GetStatus reports the new version from then on), with
// the swap's generation stall in swap_pause_ms. The blocking collectives run on the service's own
// weight-sync threads, never on a gRPC callback thread; one weight-sync call runs at a time.
//
//   grpc::EnableDefaultHealthCheckService(true);
//   EngineLoop loop(std::move(engine));
//   GeneratorService service(&loop, {.eos_token_id = model->config().eos_token_id});
//   grpc::ServerBuilder builder;
//   builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
//   builder.RegisterService(&service);
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
//   ...
//   server->Shutdown();  // before the loop and the service go away
#ifndef LOCKSTEP_GENERATOR_GENERATOR_SERVICE_H_
#define LOCKSTEP_GENERATOR_GENERATOR_SERVICE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/work_queue.h"
#include "generator/engine_loop.h"
#include "proto/generator.grpc.pb.h"
#include "weight_sync/sync_group.h"

namespace lockstep::generator {

struct GeneratorServiceOptions {
  // The model's EOS token: samples stop at it unless the request sets sampling.ignore_eos.
  std::optional<int64_t> eos_token_id;
  // When non-empty, every call must carry it (common/auth.h); others get UNAUTHENTICATED.
  std::string auth_token;
  // Weight sync: the engine model's parameter names and shapes
  // (weight_sync::ManifestOf(StateDict(model))) and the dtype it runs in (received weights are
  // cast to it). An empty manifest makes JoinWeightSync FAILED_PRECONDITION.
  weight_sync::Manifest weight_manifest;
  torch::Dtype weight_dtype = torch::kFloat32;
  // Where the engine model's weights live (weight_sync::WeightsCudaDevice(StateDict(model))):
  // -1 for host memory (every generator today), else the CUDA device index. The weight-sync
  // group's cuda_device: `auto` picks the GPU transports only for weights on CUDA, and nccl /
  // cuda_ipc are refused at JoinWeightSync (INVALID_ARGUMENT naming the transport) for host ones.
  int weight_cuda_device = -1;
};

class GeneratorService final : public v1::Generator::CallbackService {
 public:
  // `loop` is not owned and must outlive the server's shutdown.
  GeneratorService(EngineLoop* loop, GeneratorServiceOptions options);

  // Streams one GenerateResponse per sample, in finishing order, then OK. INVALID_ARGUMENT
  // (naming the field) for a bad request. Thread safety: called concurrently by gRPC.
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;

  // Joins (or re-forms: the previous group is dropped) the weight-sync group as rank
  // request.rank >= 1. INVALID_ARGUMENT naming the field, FAILED_PRECONDITION for a manifest
  // mismatch (naming the tensor) or while another weight-sync call runs, DEADLINE_EXCEEDED when
  // peers do not show up within timeout_ms.
  grpc::ServerUnaryReactor* JoinWeightSync(grpc::CallbackServerContext* context,
                                           const v1::JoinWeightSyncRequest* request,
                                           v1::JoinWeightSyncResponse* response) override;

  // Receives version request.version and swaps it in (see above). FAILED_PRECONDITION without a
  // group, for a broken group (re-join first) or a version mismatch; DEADLINE_EXCEEDED /
  // UNAVAILABLE when a peer fails mid-broadcast (the group is then broken).
  grpc::ServerUnaryReactor* ReceiveWeights(grpc::CallbackServerContext* context,
                                           const v1::ReceiveWeightsRequest* request,
                                           v1::WeightSyncResponse* response) override;

  // Waits for weight-sync calls still running (each is bounded by its group's timeout).
  ~GeneratorService() override;

 private:
  // Runs `work` on a weight-sync thread, once the call before it has ended (waiting 5 s at most,
  // else FAILED_PRECONDITION), and finishes the reactor with its status. At most two calls are
  // outstanding (the running one and the next); a third is refused at once.
  void RunSyncCall(grpc::ServerUnaryReactor* reactor, std::function<absl::Status()> work);
  absl::Status DoJoin(const v1::JoinWeightSyncRequest& request,
                      v1::JoinWeightSyncResponse* response);
  absl::Status DoReceive(const v1::ReceiveWeightsRequest& request,
                         v1::WeightSyncResponse* response);

  EngineLoop* const loop_;
  const GeneratorServiceOptions options_;

  std::mutex sync_mu_;
  std::condition_variable sync_idle_;
  bool sync_busy_ ABSL_GUARDED_BY(sync_mu_) = false;
  // Used only by the thread of the weight-sync call in progress (sync_busy_ serialises them).
  std::unique_ptr<weight_sync::WeightSyncGroup> group_;
  // Last: destroyed first, finishing the calls still running while what they use exists.
  WorkQueue sync_threads_{{.num_workers = 2, .max_queued = 0}};
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_GENERATOR_SERVICE_H_
