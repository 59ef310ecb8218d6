// Picking a TCP port for a server that some other process will bind later (a store port handed
// to child processes, a side service's --port). Such a port can be stolen between the pick and
// the bind; the kernel's own bind(port 0) picks come from the ephemeral range, which every
// outgoing connection on the machine also draws from, so PickFreePort picks outside it.
#ifndef LOCKSTEP_COMMON_FREE_PORT_H_
#define LOCKSTEP_COMMON_FREE_PORT_H_

#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

// The ports the kernel hands out for bind(port 0) and outgoing connections, inclusive.
struct PortRange {
  int low = 0;
  int high = 0;
};

// Reads the ephemeral range from `path` (Linux: "<low> <high>").
absl::StatusOr<PortRange> ReadEphemeralPortRange(
    const std::string& path = "/proc/sys/net/ipv4/ip_local_port_range");

// Where PickFreePort looks, given the ephemeral range: at least 1000 ports at or above 10000
// below the range, else above it; an empty range (low > high) when neither side has room.
PortRange PortsOutside(const PortRange& ephemeral);

// A TCP port that nothing was bound to, on any address, at the time of the call, chosen at
// random in `candidates`; when 64 random candidates were all taken (or the range is empty), the
// kernel's bind(0) pick.
absl::StatusOr<int> PickFreePort(const PortRange& candidates);

// PickFreePort over the ports outside the ephemeral range, so that no bind(0) or outgoing
// connection takes the port before its server binds it (the kernel's pick when the range cannot
// be read).
absl::StatusOr<int> PickFreePort();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_FREE_PORT_H_
