// A minimal reward server in C++: copy this file and change Score(). It needs only gRPC and the
// code generated from proto/reward.proto — no lockstep library — so it builds inside lockstep or
// on its own (see README.md).
//
// The reward: the fraction of the item's keywords (metadata "keywords", comma-separated) that
// appear in the completion, with one sub-score per keyword. An item without keywords is failed
// (its `error` set), never scored 0.
//
//   keyword_reward_server [--host 127.0.0.1] [--port 50051] [--auth-token-file FILE]
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/reward.grpc.pb.h"

namespace {

// ------------------------------------------------------------------------------------------
// Your reward: fill `score` (reward and sub-scores) or return an error message.

std::string Score(const lockstep::v1::RewardItem& item, lockstep::v1::ItemScore* score) {
  auto keywords_it = item.metadata().find("keywords");
  if (keywords_it == item.metadata().end() || keywords_it->second.empty()) {
    return "the item has no metadata \"keywords\"";
  }
  std::vector<std::string> keywords;
  std::stringstream list(keywords_it->second);
  for (std::string keyword; std::getline(list, keyword, ',');) {
    if (!keyword.empty()) keywords.push_back(keyword);
  }
  if (keywords.empty()) return "metadata \"keywords\" lists no keyword";
  int found = 0;
  for (const std::string& keyword : keywords) {
    const bool present = item.completion().find(keyword) != std::string::npos;
    found += present ? 1 : 0;
    (*score->mutable_sub_scores())[keyword] = present ? 1.0 : 0.0;
  }
  score->set_reward(static_cast<double>(found) / static_cast<double>(keywords.size()));
  return "";
}

// ------------------------------------------------------------------------------------------
// Plumbing: auth, one score per item in order, serving. Nothing here needs changing.

class KeywordReward final : public lockstep::v1::Reward::CallbackService {
 public:
  explicit KeywordReward(std::string token) : expected_(token.empty() ? "" : "Bearer " + token) {}

  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const lockstep::v1::ScoreRequest* request,
                                  lockstep::v1::ScoreResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (!Authorized(*context)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token"));
      return reactor;
    }
    for (const lockstep::v1::RewardItem& item : request->items()) {
      lockstep::v1::ItemScore* score = response->add_scores();
      score->set_id(item.id());
      std::string error = ::Score(item, score);
      if (error.empty() && !std::isfinite(score->reward())) error = "non-finite reward";
      if (!error.empty()) {
        score->Clear();
        score->set_id(item.id());
        score->set_error(error);
      }
    }
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  bool Authorized(const grpc::CallbackServerContext& context) const {
    if (expected_.empty()) return true;
    auto [begin, end] = context.client_metadata().equal_range("authorization");
    for (auto it = begin; it != end; ++it) {
      if (std::string(it->second.data(), it->second.size()) == expected_) return true;
    }
    return false;
  }

  const std::string expected_;
};

std::string ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  in >> token;
  if (token.empty()) {
    std::fprintf(stderr, "keyword_reward_server: no token in %s\n", path.c_str());
    std::exit(2);
  }
  return token;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  std::string port = "50051";
  std::string token;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--host") {
      host = argv[i + 1];
    } else if (flag == "--port") {
      port = argv[i + 1];
    } else if (flag == "--auth-token-file") {
      token = ReadToken(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--host H] [--port P] [--auth-token-file F]\n", argv[0]);
      return 2;
    }
  }
  // Block SIGINT/SIGTERM here so that every gRPC thread inherits the mask and sigwait gets them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  KeywordReward service(token);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(host + ":" + port, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::fprintf(stderr, "keyword_reward_server: cannot listen on %s:%s\n", host.c_str(),
                 port.c_str());
    return 1;
  }
  std::printf("serving on %s:%d\n", host.c_str(), bound_port);
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
