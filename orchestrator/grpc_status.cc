#include "orchestrator/grpc_status.h"

#include "absl/strings/str_cat.h"

namespace lockstep::orchestrator {

absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  // gRPC and absl share the canonical code numbering.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

}  // namespace lockstep::orchestrator
