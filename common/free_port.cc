#include "common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

constexpr int kLowestPick = 10000;
constexpr int kMinimumRoom = 1000;
constexpr int kCandidates = 64;

// Binds a fresh socket to INADDR_ANY:port (port 0: the kernel's pick) without SO_REUSEADDR, so
// that any socket on that port, on any address, makes it fail. Returns the bound port, or -errno.
int TryBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  int result;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    result = -errno;
  } else {
    result = ntohs(address.sin_port);
  }
  close(fd);
  return result;
}

}  // namespace

absl::StatusOr<PortRange> ReadEphemeralPortRange(const std::string& path) {
  std::ifstream file(path);
  PortRange range;
  if (!(file >> range.low >> range.high)) {
    return absl::NotFoundError(absl::StrCat("cannot read the ephemeral port range from ", path));
  }
  if (range.low < 1 || range.high > 65535 || range.low > range.high) {
    return absl::InvalidArgumentError(absl::StrCat("ephemeral port range in ", path, " is ",
                                                   range.low, "-", range.high));
  }
  return range;
}

PortRange PortsOutside(const PortRange& ephemeral) {
  if (ephemeral.low - kLowestPick >= kMinimumRoom) return {kLowestPick, ephemeral.low - 1};
  if (65535 - ephemeral.high >= kMinimumRoom) {
    return {std::max(ephemeral.high + 1, kLowestPick), 65535};
  }
  return {1, 0};
}

absl::StatusOr<int> PickFreePort(const PortRange& candidates) {
  if (candidates.low <= candidates.high) {
    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> pick(candidates.low, candidates.high);
    for (int i = 0; i < kCandidates; ++i) {
      const int port = TryBind(pick(random));
      if (port > 0) return port;
    }
  }
  const int port = TryBind(0);
  if (port < 0) {
    return absl::InternalError(absl::StrCat("no free TCP port: ", std::strerror(-port)));
  }
  return port;
}

absl::StatusOr<int> PickFreePort() {
  absl::StatusOr<PortRange> ephemeral = ReadEphemeralPortRange();
  return PickFreePort(ephemeral.ok() ? PortsOutside(*ephemeral) : PortRange{1, 0});
}

}  // namespace lockstep
