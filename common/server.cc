#include "common/server.h"

#include <grpcpp/health_check_service_interface.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read TLS file ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<RunningServer> StartServer(const ServerOptions& options,
                                          const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
    if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("TLS needs both a certificate file and a key file");
    }
    absl::StatusOr<std::string> cert = ReadPemFile(options.tls_cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile(options.tls_key_file);
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  RunningServer running;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, credentials, &running.port);
  // gRPC sets SO_REUSEPORT by default, which lets a second server share a port silently; an
  // occupied port must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on ", address,
                                               " (address in use or not local?)"));
  }
  return running;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const std::string& tls_ca_file) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls_ca_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> ca = ReadPemFile(tls_ca_file);
    if (ca.ok()) ssl.pem_root_certs = *ca;
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace lockstep
