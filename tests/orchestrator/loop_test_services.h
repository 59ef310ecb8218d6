// What the RL-loop tests (rl_loop_test, multiturn_loop_test) share: the addition dataset, and
// fake trainer/generator services served on 127.0.0.1 with their clients and the byte-level
// tokenizer, ready to hand to RlLoop as RlServices.
//
//   LoopTestServices services;
//   ASSERT_NO_FATAL_FAILURE(services.Start(&fake_trainer, {&fake_generator}));
//   RlServices rl{services.trainer(), services.generators(), scorer, services.tokenizer()};
//
// Thread safety: Start and the accessors on the test thread; the servers are gRPC's.
#ifndef LOCKSTEP_TESTS_ORCHESTRATOR_LOOP_TEST_SERVICES_H_
#define LOCKSTEP_TESTS_ORCHESTRATOR_LOOP_TEST_SERVICES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/server.h"
#include "data/jsonl_dataset.h"
#include "gtest/gtest.h"
#include "model/tokenizer/byte_tokenizer_writer.h"
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/trainer_client.h"

namespace lockstep::orchestrator {

// The byte-level tokenizer's end-of-sequence id.
inline constexpr int64_t kLoopTestEos = 258;

// "a+b=" -> "a+b" for a, b in [0, 9], one example per line.
inline Dataset AdditionDataset() {
  std::vector<Example> examples;
  for (int a = 0; a < 10; ++a) {
    for (int b = 0; b < 10; ++b) {
      Example example;
      example.prompt = absl::StrCat(a, "+", b, "=");
      example.answer = std::to_string(a + b);
      example.line_number = a * 10 + b + 1;
      examples.push_back(example);
    }
  }
  return Dataset(std::move(examples), "addition");
}

// A fake trainer and generators on loopback, their clients and the tokenizer. The services are
// not owned and must outlive this object; the servers shut down when it goes away.
class LoopTestServices {
 public:
  LoopTestServices() = default;
  LoopTestServices(const LoopTestServices&) = delete;
  LoopTestServices& operator=(const LoopTestServices&) = delete;
  ~LoopTestServices() {
    if (trainer_server_) trainer_server_->Shutdown();
    for (auto& server : generator_servers_) server->Shutdown();
  }

  // Serves `trainer` and each of `generators` on a free port (fatal test failure otherwise).
  void Start(grpc::Service* trainer, const std::vector<grpc::Service*>& generators) {
    absl::StatusOr<RunningServer> trainer_server = StartServer({}, {trainer});
    ASSERT_TRUE(trainer_server.ok()) << trainer_server.status();
    trainer_server_ = std::move(trainer_server->server);
    trainer_ =
        std::make_unique<TrainerClient>(absl::StrCat("127.0.0.1:", trainer_server->port), "");
    for (grpc::Service* service : generators) {
      absl::StatusOr<RunningServer> generator = StartServer({}, {service});
      ASSERT_TRUE(generator.ok()) << generator.status();
      generator_servers_.push_back(std::move(generator->server));
      generator_clients_.push_back(
          std::make_unique<GeneratorClient>(absl::StrCat("127.0.0.1:", generator->port), ""));
    }
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
        Tokenizer::FromJsonString(ByteLevelTokenizerJson().dump());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  TrainerClient* trainer() const { return trainer_.get(); }
  std::vector<GeneratorClient*> generators() const {
    std::vector<GeneratorClient*> clients;
    for (const auto& client : generator_clients_) clients.push_back(client.get());
    return clients;
  }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }

 private:
  std::unique_ptr<grpc::Server> trainer_server_;
  std::vector<std::unique_ptr<grpc::Server>> generator_servers_;
  std::unique_ptr<TrainerClient> trainer_;
  std::vector<std::unique_ptr<GeneratorClient>> generator_clients_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_TESTS_ORCHESTRATOR_LOOP_TEST_SERVICES_H_
