#include "common/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

constexpr char kAuthKey[] = "authorization";
constexpr char kBearer[] = "Bearer ";

}  // namespace

absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("auth token file ", path, ": cannot open"));
  std::stringstream contents;
  contents << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(contents.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("auth token file ", path, " is empty"));
  }
  return token;
}

std::string NewAuthToken() {
  std::random_device device;  // reads the OS random source
  std::string token;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof(part), "%08x", static_cast<unsigned>(device()));
    token += part;
  }
  return token;
}

absl::Status WriteAuthTokenFile(const std::string& path, const std::string& token) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create auth token file ", path));
  const std::string line = token + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write auth token file ", path));
  return absl::OkStatus();
}

grpc::Status CheckAuth(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const std::string expected = absl::StrCat(kBearer, token);
  const auto& metadata = context.client_metadata();
  for (auto it = metadata.lower_bound(kAuthKey); it != metadata.upper_bound(kAuthKey); ++it) {
    const grpc::string_ref& value = it->second;
    if (value.size() != expected.size()) continue;
    unsigned char diff = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff |= static_cast<unsigned char>(value.data()[i] ^ expected[i]);
    }
    if (diff == 0) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong auth token (pass the job's token as "
                      "'authorization: Bearer <token>')");
}

void AttachAuthToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata(kAuthKey, absl::StrCat(kBearer, token));
}

}  // namespace lockstep
