// gRPC adapter that serves an EngineLoop as lockstep.v1.Generator (callback API). Generate
// converts the request, submits it to the loop and streams each sample as the loop delivers it;
// a cancelled stream cancels its request (its KV blocks are freed). GetStatus reads the loop's
// last snapshot.
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

#include <cstdint>
#include <optional>
#include <string>

#include "generator/engine_loop.h"
#include "proto/generator.grpc.pb.h"

namespace lockstep::generator {

struct GeneratorServiceOptions {
  // The model's EOS token: samples stop at it unless the request sets sampling.ignore_eos.
  std::optional<int64_t> eos_token_id;
  // When non-empty, every call must carry it (common/auth.h); others get UNAUTHENTICATED.
  std::string auth_token;
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

 private:
  EngineLoop* const loop_;
  const GeneratorServiceOptions options_;
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_GENERATOR_SERVICE_H_
