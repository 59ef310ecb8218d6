#include "orchestrator/service_health.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace lockstep::orchestrator {
namespace {

// HealthCheckResponse.status (field 1, varint) from the serialized message; 0 (UNKNOWN) when
// absent, as proto3 leaves default values out.
int ServingStatus(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  // The message has one field; anything else is unexpected.
  if (bytes.empty()) return 0;
  if (bytes.size() < 2 || bytes[0] != 0x08) return -1;
  return static_cast<unsigned char>(bytes[1]) & 0x7f;
}

const char* StatusName(int status) {
  switch (status) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
    default:
      return "an unreadable answer";
  }
}

}  // namespace

absl::Status CheckServing(const std::string& address, absl::Duration timeout) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);  // a loopback child, never via a proxy
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  context.set_wait_for_ready(true);  // wait through connection attempts until the deadline

  grpc::ByteBuffer request;  // HealthCheckRequest{service: ""} serializes to no bytes
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status call_status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) {
                   call_status = std::move(status);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!call_status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("health check of ", address, " failed: ", call_status.error_message()));
  }
  int status = ServingStatus(response);
  if (status != 1) {
    return absl::UnavailableError(
        absl::StrCat("health check of ", address, " answered ", StatusName(status)));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::orchestrator
