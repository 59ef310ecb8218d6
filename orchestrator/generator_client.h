// The orchestrator's client of a generator service (lockstep.v1.Generator): asynchronous
// streaming Generate (all n samples of one prompt, delivered together), status, and the
// weight-sync RPCs. Every call carries the job's auth token and a deadline; errors name the
// generator's address and the RPC.
//
// Thread safety: all methods are thread-safe. GenerateAsync's `done` runs on a gRPC thread,
// exactly once, after the call ends; it must be quick (hand the result to a queue).
#ifndef LOCKSTEP_ORCHESTRATOR_GENERATOR_CLIENT_H_
#define LOCKSTEP_ORCHESTRATOR_GENERATOR_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/service_client.h"
#include "proto/generator.grpc.pb.h"

namespace lockstep::orchestrator {

// All samples of one request, sorted by sample_index, or the call's error.
using GenerateDone = std::function<void(absl::StatusOr<std::vector<v1::GenerateResponse>>)>;

// GetStatus, JoinWeightSync and address() are ServiceClient's.
class GeneratorClient final
    : public ServiceClient<v1::Generator, v1::GetStatusRequest, v1::GetStatusResponse> {
 public:
  // Connects lazily to `address` ("host:port"); `auth_token` may be empty (auth off).
  GeneratorClient(std::string address, std::string auth_token, std::string tls_ca_file = "");

  // Starts one Generate call and returns at once. `done` gets every sample (n of them), or an
  // error (the stream failed, or ended with fewer than n samples).
  void GenerateAsync(const v1::GenerateRequest& request, absl::Duration timeout, GenerateDone done);

  // Blocking form of GenerateAsync.
  absl::StatusOr<std::vector<v1::GenerateResponse>> Generate(const v1::GenerateRequest& request,
                                                             absl::Duration timeout);

  absl::StatusOr<v1::WeightSyncResponse> ReceiveWeights(int64_t version, absl::Duration timeout);
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_GENERATOR_CLIENT_H_
