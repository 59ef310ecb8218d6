// What the orchestrator's clients of one service share: the service's address, the job's auth
// token, one stub over one channel, and unary calls with a deadline whose errors name the
// service, its address and the RPC ("trainer 127.0.0.1:4101 TrainStep: ...").
//
//   ServiceChannel<v1::Trainer> channel("trainer", address, token, tls_ca_file);
//   absl::StatusOr<v1::TrainStepResponse> step =
//       channel.Call(&v1::Trainer::Stub::TrainStep, "TrainStep", request, absl::Minutes(10));
//
// Thread safety: every method is thread-safe (a gRPC stub is).
#ifndef LOCKSTEP_ORCHESTRATOR_SERVICE_CHANNEL_H_
#define LOCKSTEP_ORCHESTRATOR_SERVICE_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "common/server.h"

namespace lockstep::orchestrator {

template <typename Service>
class ServiceChannel {
 public:
  using Stub = typename Service::Stub;

  // Connects lazily to `address` ("host:port"); `auth_token` may be empty (auth off). `kind`
  // names the service in errors ("trainer", "generator").
  ServiceChannel(std::string kind, std::string address, std::string auth_token,
                 const std::string& tls_ca_file)
      : kind_(std::move(kind)),
        address_(std::move(address)),
        auth_token_(std::move(auth_token)),
        stub_(Service::NewStub(MakeChannel(address_, tls_ca_file))) {}

  // The token and a deadline `timeout` from now, for any call on this channel.
  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
    AttachAuthToken(context, auth_token_);
    context->set_deadline(std::chrono::system_clock::now() +
                          absl::ToChronoMilliseconds(timeout));
  }

  // One unary RPC (`rpc` is the stub's blocking method, `name` its name in errors).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                          Response*),
                                const char* name, const Request& request,
                                absl::Duration timeout) const {
    grpc::ClientContext context;
    Prepare(&context, timeout);
    Response response;
    absl::Status status =
        FromGrpcStatus((stub_.get()->*rpc)(&context, request, &response), What(name));
    if (!status.ok()) return status;
    return response;
  }

  // "generator 127.0.0.1:4201 Generate": how errors of a call named `name` begin.
  std::string What(const char* name) const { return absl::StrCat(kind_, " ", address_, " ", name); }

  const std::string& address() const { return address_; }
  Stub* stub() const { return stub_.get(); }

 private:
  const std::string kind_;
  const std::string address_;
  const std::string auth_token_;
  const std::unique_ptr<Stub> stub_;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_SERVICE_CHANNEL_H_
