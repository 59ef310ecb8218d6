#include "generator/generator_convert.h"

#include <google/protobuf/unknown_field_set.h>

#include <string>

namespace lockstep::generator {

absl::StatusOr<Request> FromProto(const v1::GenerateRequest& proto,
                                  std::optional<int64_t> eos_token_id) {
  const v1::SamplingParams& sampling = proto.sampling();
  if (!sampling.GetReflection()->GetUnknownFields(sampling).empty()) {
    return absl::InvalidArgumentError("sampling has unknown fields (client newer than server?)");
  }
  if (proto.n() < 0) return absl::InvalidArgumentError("n must be >= 1");
  Request request;
  request.prompt.assign(proto.prompt_token_ids().begin(), proto.prompt_token_ids().end());
  request.n = proto.n() == 0 ? 1 : proto.n();
  request.seed = sampling.seed();
  SamplingParams& params = request.params;
  params.temperature = sampling.has_temperature() ? sampling.temperature() : 1.0;
  params.top_p = sampling.has_top_p() ? sampling.top_p() : 1.0;
  params.top_k = sampling.top_k();
  params.max_tokens = sampling.max_tokens();
  params.stop_token_ids.assign(sampling.stop_token_ids().begin(), sampling.stop_token_ids().end());
  if (!sampling.ignore_eos()) params.eos_token_id = eos_token_id;
  return request;
}

v1::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case FinishReason::kStopToken:
      return v1::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kMaxTokens:
      return v1::FINISH_REASON_MAX_TOKENS;
    case FinishReason::kAborted:
      return v1::FINISH_REASON_ABORTED;
    case FinishReason::kNone:
      break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void ToProto(const SampleOutput& sample, v1::GenerateResponse* proto) {
  proto->set_sample_index(sample.sample_index);
  proto->mutable_token_ids()->Add(sample.tokens.begin(), sample.tokens.end());
  proto->mutable_logprobs()->Add(sample.logprobs.begin(), sample.logprobs.end());
  proto->mutable_weight_versions()->Add(sample.weight_versions.begin(),
                                        sample.weight_versions.end());
  proto->set_finish_reason(ToProto(sample.finish_reason));
  proto->set_num_preemptions(sample.num_preemptions);
  proto->mutable_routed_experts()->Add(sample.routed_experts.begin(), sample.routed_experts.end());
}

void ToProto(const EngineLoopStatus& status, v1::GetStatusResponse* proto) {
  proto->set_weight_version(status.weight_version);
  proto->set_num_running(status.num_running);
  proto->set_num_waiting(status.num_waiting);
  proto->set_num_kv_blocks_used(status.num_kv_blocks - status.num_kv_blocks_free);
  proto->set_num_kv_blocks_free(status.num_kv_blocks_free);
  proto->set_num_requests(status.num_requests);
}

}  // namespace lockstep::generator
