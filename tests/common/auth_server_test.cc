// common/: auth tokens (files, server check, client attach) and StartServer (binding, health,
// port in use), over real loopback servers.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/reward.grpc.pb.h"

namespace lockstep {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         absl::StrCat("lockstep_auth_test_", ::getpid(), "_", name);
}

TEST(AuthTokenFile, RoundTripsWithOwnerOnlyMode) {
  const std::filesystem::path path = TempPath("token");
  const std::string token = NewAuthToken();
  ASSERT_TRUE(WriteAuthTokenFile(path.string(), token).ok());
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  absl::StatusOr<std::string> read = ReadAuthTokenFile(path.string());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, token);
  std::filesystem::remove(path);
}

TEST(AuthTokenFile, MissingAndEmptyFilesAreErrorsNamingThePath) {
  const std::filesystem::path path = TempPath("empty");
  absl::StatusOr<std::string> missing = ReadAuthTokenFile(path.string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path.string()));
  std::ofstream(path) << "  \n";
  absl::StatusOr<std::string> empty = ReadAuthTokenFile(path.string());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
}

TEST(AuthToken, FreshTokensAreLongAndDistinct) {
  std::set<std::string> tokens;
  for (int i = 0; i < 16; ++i) {
    const std::string token = NewAuthToken();
    EXPECT_EQ(token.size(), 32u);
    tokens.insert(token);
  }
  EXPECT_EQ(tokens.size(), 16u);
}

// A health service that requires the token: the smallest real service to check CheckAuth on.
class GuardedHealth final : public Health::CallbackService {
 public:
  explicit GuardedHealth(std::string token) : token_(std::move(token)) {}
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const HealthCheckRequest*, HealthCheckResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const grpc::Status status = CheckAuth(*context, token_);
    if (status.ok()) response->set_status(HealthCheckResponse::SERVING);
    reactor->Finish(status);
    return reactor;
  }

 private:
  const std::string token_;
};

grpc::Status CallCheck(Health::Stub& stub, const std::string& token) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  AttachAuthToken(&context, token);
  HealthCheckRequest request;
  HealthCheckResponse response;
  return stub.Check(&context, request, &response);
}

TEST(CheckAuth, RefusesCallsWithoutTheTokenAndAcceptsIt) {
  GuardedHealth service("s3cret-token");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Health::Stub> stub = Health::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", port)));

  EXPECT_EQ(CallCheck(*stub, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallCheck(*stub, "s3cret-tokeN").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallCheck(*stub, "s3cret-token-and-more").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(CallCheck(*stub, "s3cret-token").ok());
  server->Shutdown();
}

TEST(CheckAuth, AnEmptyServerTokenMeansAuthOff) {
  GuardedHealth service("");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Health::Stub> stub = Health::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", port)));
  EXPECT_TRUE(CallCheck(*stub, "").ok());
  server->Shutdown();
}

TEST(StartServer, ServesHealthOnLoopbackAndRefusesAPortInUse) {
  // Any callback service will do (its methods answer UNIMPLEMENTED): a server needs one.
  v1::Reward::CallbackService service;
  absl::StatusOr<RunningServer> first = StartServer({}, {&service});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->port, 0);
  std::unique_ptr<Health::Stub> stub =
      Health::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", first->port)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  ServerOptions same_port;
  same_port.port = first->port;
  v1::Reward::CallbackService other_service;
  absl::StatusOr<RunningServer> second = StartServer(same_port, {&other_service});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat(":", first->port)));
  first->server->Shutdown();
}

TEST(StartServer, TlsNeedsBothFiles) {
  ServerOptions options;
  options.tls_cert_file = "/nonexistent/cert.pem";
  absl::StatusOr<RunningServer> server = StartServer(options, {});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep
