// The base of the orchestrator's clients of the services that join a job's weight-sync group
// (trainer_client.h, generator_client.h): the calls each of them answers alike — its status,
// and joining the group — over one ServiceChannel. Each client adds its service's own calls.
//
// Thread safety: every method is thread-safe (a gRPC stub is).
#ifndef LOCKSTEP_ORCHESTRATOR_SERVICE_CLIENT_H_
#define LOCKSTEP_ORCHESTRATOR_SERVICE_CLIENT_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/service_channel.h"
#include "proto/weight_sync.pb.h"

namespace lockstep::orchestrator {

// `Service` is the gRPC service (v1::Trainer); `StatusRequest` and `StatusResponse` are the
// types of its GetStatus.
template <typename Service, typename StatusRequest, typename StatusResponse>
class ServiceClient {
 public:
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout = absl::Seconds(30)) const {
    return channel_.Call(&Service::Stub::GetStatus, "GetStatus", StatusRequest(), timeout);
  }

  absl::StatusOr<v1::JoinWeightSyncResponse> JoinWeightSync(
      const v1::JoinWeightSyncRequest& request, absl::Duration timeout) const {
    return channel_.Call(&Service::Stub::JoinWeightSync, "JoinWeightSync", request, timeout);
  }

  const std::string& address() const { return channel_.address(); }

 protected:
  // Connects lazily to `address` ("host:port"); `auth_token` may be empty (auth off). `kind`
  // names the service in errors ("trainer 127.0.0.1:4101 GetStatus: ...").
  ServiceClient(std::string kind, std::string address, std::string auth_token,
                const std::string& tls_ca_file)
      : channel_(std::move(kind), std::move(address), std::move(auth_token), tls_ca_file) {}

  const ServiceChannel<Service>& channel() const { return channel_; }

  // A weight-sync RPC whose request holds only the weight version (Trainer.PublishWeights,
  // Generator.ReceiveWeights); `name` names it in errors.
  template <typename VersionRequest>
  absl::StatusOr<v1::WeightSyncResponse> CallWithVersion(
      grpc::Status (Service::Stub::*rpc)(grpc::ClientContext*, const VersionRequest&,
                                         v1::WeightSyncResponse*),
      const char* name, int64_t version, absl::Duration timeout) const {
    VersionRequest request;
    request.set_version(version);
    return channel_.Call(rpc, name, request, timeout);
  }

 private:
  ServiceChannel<Service> channel_;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_SERVICE_CLIENT_H_
