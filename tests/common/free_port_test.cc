// PickFreePort: ports outside the kernel's ephemeral range that nothing holds.
#include "common/free_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace lockstep {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("free_port_test_" + std::to_string(getpid()) + name);
  std::ofstream(path) << text;
  return path.string();
}

// Binds INADDR_ANY:port; returns the socket (listening when `listen_too`) or -1.
int BindAny(int port, bool listen_too) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      (listen_too && listen(fd, 1) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(ReadEphemeralPortRangeTest, ParsesTheKernelFormat) {
  absl::StatusOr<PortRange> range = ReadEphemeralPortRange(WriteFile("ok", "32768\t60999\n"));
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->low, 32768);
  EXPECT_EQ(range->high, 60999);
}

TEST(ReadEphemeralPortRangeTest, RefusesMissingAndNonsenseFiles) {
  EXPECT_EQ(ReadEphemeralPortRange("/nonexistent/ip_local_port_range").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadEphemeralPortRange(WriteFile("words", "many ports")).status().code(),
            absl::StatusCode::kNotFound);
  const absl::Status reversed = ReadEphemeralPortRange(WriteFile("rev", "60999 32768")).status();
  EXPECT_EQ(reversed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reversed.message().find("60999-32768"), std::string::npos) << reversed;
}

TEST(PortsOutsideTest, PrefersBelowThenAboveThenNothing) {
  const PortRange below = PortsOutside({32768, 60999});
  EXPECT_EQ(below.low, 10000);
  EXPECT_EQ(below.high, 32767);
  const PortRange above = PortsOutside({1024, 50000});
  EXPECT_EQ(above.low, 50001);
  EXPECT_EQ(above.high, 65535);
  const PortRange none = PortsOutside({1024, 65000});
  EXPECT_GT(none.low, none.high);
}

TEST(PickFreePortTest, PicksBindablePortsOutsideTheEphemeralRange) {
  absl::StatusOr<PortRange> ephemeral = ReadEphemeralPortRange();
  ASSERT_TRUE(ephemeral.ok()) << ephemeral.status();
  const PortRange outside = PortsOutside(*ephemeral);
  ASSERT_LE(outside.low, outside.high) << "this machine's range leaves no room to test";
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<int> port = PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, outside.low);
    EXPECT_LE(*port, outside.high);
    const int fd = BindAny(*port, /*listen_too=*/true);
    EXPECT_GE(fd, 0) << "port " << *port << " was not free";
    if (fd >= 0) close(fd);
    seen.insert(*port);
  }
  EXPECT_GT(seen.size(), 10u) << "the picks should be spread at random";
}

TEST(PickFreePortTest, SkipsHeldPortsAndFallsBackToTheKernelsPick) {
  absl::StatusOr<PortRange> ephemeral = ReadEphemeralPortRange();
  ASSERT_TRUE(ephemeral.ok()) << ephemeral.status();
  // Two neighbouring ports below the ephemeral range that are free now.
  int first = -1;
  for (int port = 20000; port + 1 < ephemeral->low && first < 0; port += 7) {
    const int a = BindAny(port, false), b = BindAny(port + 1, false);
    if (a >= 0 && b >= 0) first = port;
    if (a >= 0) close(a);
    if (b >= 0) close(b);
  }
  ASSERT_GE(first, 0);
  const PortRange pair{first, first + 1};

  const int held_first = BindAny(first, /*listen_too=*/true);
  ASSERT_GE(held_first, 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(PickFreePort(pair).value_or(-1), first + 1);

  const int held_second = BindAny(first + 1, /*listen_too=*/false);  // bound, not listening
  ASSERT_GE(held_second, 0);
  absl::StatusOr<int> fallback = PickFreePort(pair);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_GE(*fallback, ephemeral->low) << "both held: the kernel's pick";
  EXPECT_LE(*fallback, ephemeral->high);
  close(held_first);
  close(held_second);
}

}  // namespace
}  // namespace lockstep
