#include "sandbox/sandbox_convert.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::sandbox {
namespace {

v1::Verdict VerdictToProto(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk: return v1::VERDICT_OK;
    case Verdict::kNonzeroExit: return v1::VERDICT_NONZERO_EXIT;
    case Verdict::kTimeout: return v1::VERDICT_TIMEOUT;
    case Verdict::kMemoryLimit: return v1::VERDICT_MEMORY_LIMIT;
    case Verdict::kOutputLimit: return v1::VERDICT_OUTPUT_LIMIT;
    case Verdict::kKilled: return v1::VERDICT_KILLED;
    case Verdict::kCompileError: return v1::VERDICT_COMPILE_ERROR;
    case Verdict::kSandboxError: return v1::VERDICT_SANDBOX_ERROR;
  }
  return v1::VERDICT_UNSPECIFIED;
}

absl::StatusOr<Verdict> VerdictFromProto(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_OK: return Verdict::kOk;
    case v1::VERDICT_NONZERO_EXIT: return Verdict::kNonzeroExit;
    case v1::VERDICT_TIMEOUT: return Verdict::kTimeout;
    case v1::VERDICT_MEMORY_LIMIT: return Verdict::kMemoryLimit;
    case v1::VERDICT_OUTPUT_LIMIT: return Verdict::kOutputLimit;
    case v1::VERDICT_KILLED: return Verdict::kKilled;
    case v1::VERDICT_COMPILE_ERROR: return Verdict::kCompileError;
    case v1::VERDICT_SANDBOX_ERROR: return Verdict::kSandboxError;
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sandbox response: unknown verdict ", static_cast<int>(verdict)));
}

}  // namespace

void ToProto(const ExecRequest& request, v1::ExecuteRequest* proto) {
  proto->set_language(request.language);
  proto->set_source(request.source);
  for (const std::string& arg : request.argv) proto->add_argv(arg);
  for (const SourceFile& file : request.files) {
    v1::SourceFile* out = proto->add_files();
    out->set_path(file.path);
    out->set_content(file.content);
    out->set_executable(file.executable);
  }
  proto->set_stdin_data(request.stdin_data);
  const ExecLimits& limits = request.limits;
  v1::ExecLimits* out = proto->mutable_limits();
  out->set_wall_ms(limits.wall_ms);
  out->set_cpu_ms(limits.cpu_ms);
  out->set_memory_mb(limits.memory_mb);
  out->set_max_processes(limits.max_processes);
  out->set_max_output_bytes(limits.max_output_bytes);
  out->set_max_file_bytes(limits.max_file_bytes);
  out->set_work_dir_mb(limits.work_dir_mb);
  out->set_max_open_files(limits.max_open_files);
}

ExecRequest FromProto(const v1::ExecuteRequest& proto) {
  ExecRequest request;
  request.language = proto.language();
  request.source = proto.source();
  request.argv.assign(proto.argv().begin(), proto.argv().end());
  for (const v1::SourceFile& file : proto.files()) {
    request.files.push_back({file.path(), file.content(), file.executable()});
  }
  request.stdin_data = proto.stdin_data();
  const v1::ExecLimits& in = proto.limits();
  ExecLimits& limits = request.limits;
  if (in.has_wall_ms()) limits.wall_ms = in.wall_ms();
  if (in.has_cpu_ms()) limits.cpu_ms = in.cpu_ms();
  if (in.has_memory_mb()) limits.memory_mb = in.memory_mb();
  if (in.has_max_processes()) limits.max_processes = in.max_processes();
  if (in.has_max_output_bytes()) limits.max_output_bytes = in.max_output_bytes();
  if (in.has_max_file_bytes()) limits.max_file_bytes = in.max_file_bytes();
  if (in.has_work_dir_mb()) limits.work_dir_mb = in.work_dir_mb();
  if (in.has_max_open_files()) limits.max_open_files = in.max_open_files();
  return request;
}

void ToProto(const ExecResult& result, v1::ExecuteResponse* proto) {
  proto->set_verdict(VerdictToProto(result.verdict));
  proto->set_exit_code(result.exit_code);
  proto->set_signal(result.signal);
  proto->set_stdout_data(result.stdout_data);
  proto->set_stderr_data(result.stderr_data);
  proto->set_truncated(result.truncated);
  proto->set_wall_ms(result.wall_ms);
  proto->set_cpu_ms(result.cpu_ms);
  proto->set_peak_memory_mb(result.peak_memory_mb);
  proto->set_error(result.error);
}

absl::StatusOr<ExecResult> FromProto(const v1::ExecuteResponse& proto) {
  absl::StatusOr<Verdict> verdict = VerdictFromProto(proto.verdict());
  if (!verdict.ok()) return verdict.status();
  ExecResult result;
  result.verdict = *verdict;
  result.exit_code = proto.exit_code();
  result.signal = proto.signal();
  result.stdout_data = proto.stdout_data();
  result.stderr_data = proto.stderr_data();
  result.truncated = proto.truncated();
  result.wall_ms = proto.wall_ms();
  result.cpu_ms = proto.cpu_ms();
  result.peak_memory_mb = proto.peak_memory_mb();
  result.error = proto.error();
  return result;
}

}  // namespace lockstep::sandbox
