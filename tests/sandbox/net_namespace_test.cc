// The network namespaces a root caller's runs reuse (sandbox/net_namespace_pool.h): owned by the
// host's root, so a program can change nothing of them (net.* sysctls, interfaces), one run's
// sockets are never seen by a later run of the same namespace, parallel runs never share one,
// and a run still reaches nothing (ContainmentTest.NoNetworkNotEvenTheHostsLoopback runs on
// pooled namespaces too). Each case runs on the shared sandbox (warm starts) and on one without
// warm inits (cold starts, which take the namespace the last run gave back).
#include <unistd.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox {
namespace {

using testing::ExpectNextRunWorks;
using testing::Python;
using ::testing::HasSubstr;
using ::testing::Not;

// Whether `sandbox` reuses namespaces of the host's root (a root caller that may make them).
bool Pooled(const Sandbox& sandbox) {
  return absl::StrContains(sandbox.isolation().lines[0], "owned by the host's root");
}

// Every run a cold start: it takes the namespace the run before gave back.
Sandbox& ColdSandbox() {
  static Sandbox* const cold =
      testing::CreateSandboxOrAbort(SandboxOptions{.warm_inits = 0}).release();
  return *cold;
}

class NetNamespaceTest : public ::testing::TestWithParam<bool> {
 protected:
  Sandbox& sandbox() { return GetParam() ? testing::SharedSandbox(true) : ColdSandbox(); }

  std::string RunOk(const std::string& source) {
    absl::StatusOr<ExecResult> result = sandbox().Run(Python(source));
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return "";
    EXPECT_EQ(result->verdict, Verdict::kOk) << result->stderr_data << result->error;
    return result->stdout_data;
  }

  void TearDown() override { ExpectNextRunWorks(sandbox()); }
};

constexpr const char* kSysctls[] = {"/proc/sys/net/ipv4/ip_local_port_range",
                                    "/proc/sys/net/core/somaxconn",
                                    "/proc/sys/net/ipv4/ping_group_range"};

TEST_P(NetNamespaceTest, NetSysctlsCannotBeWrittenNorSeenByTheNextRun) {
  std::string paths;
  for (const char* path : kSysctls) absl::StrAppend(&paths, "\"", path, "\",");
  const std::string writer = absl::StrReplaceAll(R"(
for path, value in zip([PATHS], ["40000 40001", "7", "0 0"]):
    print(path, "before", open(path).read().strip())
    try:
        with open(path, "w") as f:
            f.write(value)
        print(path, "WRITTEN")
    except OSError as e:
        print(path, "refused", e.errno)
)",
                                                 {{"PATHS", paths}});
  const std::string first = RunOk(writer);
  for (const char* path : kSysctls) {
    EXPECT_THAT(first, HasSubstr(absl::StrCat(path, " before ")));  // visible, so not vacuous
    // Refused either way: pooled, the namespace is the host root's; else the program has no
    // CAP_NET_ADMIN over its own.
    EXPECT_THAT(first, HasSubstr(absl::StrCat(path, " refused")));
  }
  // Whichever namespace the next runs get (reused or not), they see the values from before.
  const std::string reader = absl::StrReplaceAll(R"(
for path in [PATHS]:
    print(path, "before", open(path).read().strip())
)",
                                                 {{"PATHS", paths}});
  for (int run = 0; run < 3; ++run) {
    const std::string next = RunOk(reader);
    for (absl::string_view line : absl::StrSplit(next, '\n', absl::SkipEmpty())) {
      EXPECT_THAT(first, HasSubstr(std::string(line))) << "run " << run;
    }
  }
}

TEST_P(NetNamespaceTest, InterfacesCannotBeConfigured) {
  const std::string source = R"(
import fcntl, socket, struct
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def up():
    flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0))[:18])[1]
    return flags & 1
print("lo up", up())
for name, request, payload in [("flags", 0x8914, struct.pack("16sH", b"lo", 1)),
                               ("mtu", 0x8922, struct.pack("16si", b"lo", 1280)),
                               ("name", 0x8923, struct.pack("16s16s", b"lo", b"evil"))]:
    try:
        fcntl.ioctl(s, request, payload + bytes(40 - len(payload)))
        print(name, "CHANGED")
    except OSError as e:
        print(name, "refused", e.errno)
print("lo up", up())
)";
  for (int run = 0; run < 2; ++run) {
    const std::string out = RunOk(source);
    EXPECT_THAT(out, Not(HasSubstr("CHANGED")));
    EXPECT_THAT(out, HasSubstr("flags refused"));
    EXPECT_THAT(out, Not(HasSubstr("lo up 1")));
  }
}

TEST_P(NetNamespaceTest, SocketsOfOneRunAreGoneInTheNext) {
  const std::string name = absl::StrCat("lockstep-netns-test-", getpid(), "-", GetParam());
  // Listening abstract sockets: one held by the program, one by a daemonised grandchild, one in
  // flight in a unix socket's queue that is itself only reachable from that queue (freed by the
  // kernel's unix garbage collector, some time after the run).
  const std::string leaver = absl::StrReplaceAll(R"(
import os, socket, time
def listener(suffix):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0NAME-" + suffix)
    s.listen()
    return s
held = listener("held")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        daemon = listener("daemon")
        time.sleep(60)
    os._exit(0)
in_flight = listener("in-flight")
a, b = socket.socketpair()
socket.send_fds(a, [b"x"], [in_flight.fileno(), a.fileno(), b.fileno()])
in_flight.close(); a.close(); b.close()
time.sleep(0.2)
print("sockets:", len(open("/proc/net/unix").read().splitlines()) - 1)
)",
                                                 {{"NAME", name}});
  const std::string looker = absl::StrReplaceAll(R"(
import socket
print("sockets:", len(open("/proc/net/unix").read().splitlines()) - 1)
for suffix in ["held", "daemon", "in-flight"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0NAME-" + suffix)
        print(suffix, "CONNECTED")
    except OSError as e:
        print(suffix, "refused", e.errno)
)",
                                                 {{"NAME", name}});
  for (int round = 0; round < 2; ++round) {
    const std::string left = RunOk(leaver);
    EXPECT_THAT(left, Not(HasSubstr("sockets: 0\n")));  // the leaver did hold sockets
    for (int run = 0; run < 3; ++run) {
      const std::string seen = RunOk(looker);
      EXPECT_THAT(seen, HasSubstr("sockets: 0\n")) << seen;
      EXPECT_THAT(seen, Not(HasSubstr("CONNECTED"))) << seen;
      EXPECT_THAT(seen, HasSubstr("in-flight refused")) << seen;
    }
  }
}

std::string NetNamespaceOf(const std::string& out) {
  const size_t at = out.find("net:[");
  return at == std::string::npos ? "" : out.substr(at, out.find(']', at) - at + 1);
}

TEST_P(NetNamespaceTest, ParallelRunsNeverShareANamespace) {
  constexpr int kThreads = 6;
  std::vector<std::string> seen(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<ExecResult> result = sandbox().Run(
          Python("import os, time\nprint(os.readlink('/proc/self/ns/net'))\ntime.sleep(0.5)\n"));
      if (result.ok() && result->verdict == Verdict::kOk) seen[i] = result->stdout_data;
    });
  }
  for (std::thread& thread : threads) thread.join();
  char host[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/net", host, sizeof(host) - 1), 0);
  std::set<std::string> distinct;
  for (const std::string& out : seen) {
    const std::string ns = NetNamespaceOf(out);
    ASSERT_FALSE(ns.empty()) << out;
    EXPECT_NE(ns, host);
    distinct.insert(ns);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads));
}

TEST_P(NetNamespaceTest, RunsOneAfterAnotherReuseANamespace) {
  if (!Pooled(sandbox())) GTEST_SKIP() << "not root: every run makes its own network namespace";
  constexpr int kRuns = 6;
  std::set<std::string> distinct;
  for (int run = 0; run < kRuns; ++run) {
    const std::string ns = NetNamespaceOf(RunOk("import os\nprint(os.readlink('/proc/self/ns/net'))\n"));
    ASSERT_FALSE(ns.empty());
    distinct.insert(ns);
  }
  // Cold starts take a namespace an earlier run gave back (the run just before may still hold
  // its own for the moment its outer init takes to exit, until the reaper has it); warm inits
  // (2 idle, each spawned while the run before still holds its own) cycle through a few.
  EXPECT_LE(distinct.size(), GetParam() ? 4u : 2u);
}

INSTANTIATE_TEST_SUITE_P(Starts, NetNamespaceTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Warm" : "Cold";
                         });

}  // namespace
}  // namespace lockstep::sandbox
