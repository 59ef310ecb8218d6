#include "bench/generator/engine_workload.h"

#include <time.h>

#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::bench {

double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9;
}

std::vector<int64_t> WorkloadPrompt(int64_t s, int64_t prompt_len, int64_t vocab_size) {
  std::vector<int64_t> prompt(prompt_len);
  for (int64_t t = 0; t < prompt_len; ++t) prompt[t] = (17 + s * 7919 + t * 104729) % vocab_size;
  return prompt;
}

absl::StatusOr<WorkloadResult> RunDecodeWorkload(generator::Engine& engine, int64_t batch,
                                                 int64_t prompt_len, int64_t max_tokens,
                                                 int64_t vocab_size) {
  using Clock = std::chrono::steady_clock;
  if (engine.HasUnfinished()) return absl::InternalError("workload: the engine is not idle");
  std::map<int64_t, int64_t> prompt_of_request;
  for (int64_t s = 0; s < batch; ++s) {
    generator::Request request;
    request.prompt = WorkloadPrompt(s, prompt_len, vocab_size);
    request.params.temperature = 0.0;  // greedy
    request.params.max_tokens = max_tokens;
    request.seed = static_cast<uint64_t>(s);
    absl::StatusOr<int64_t> id = engine.AddRequest(request);
    if (!id.ok()) return id.status();
    prompt_of_request[*id] = s;
  }

  WorkloadResult result;
  result.batch = batch;
  result.tokens.resize(batch);
  int64_t num_finished = 0;
  while (engine.HasUnfinished()) {
    const auto start = Clock::now();
    const double cpu_start = ProcessCpuSeconds();
    absl::StatusOr<std::vector<generator::SampleOutput>> finished = engine.Step();
    const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!finished.ok()) return finished.status();
    const bool prefill = result.num_steps == 0;
    (prefill ? result.prefill_seconds : result.decode_seconds) += seconds;
    (prefill ? result.prefill_cpu_seconds : result.decode_cpu_seconds) += cpu_seconds;
    ++result.num_steps;
    for (generator::SampleOutput& out : *finished) {
      if (static_cast<int64_t>(out.tokens.size()) != max_tokens) {
        return absl::InternalError(absl::StrCat("workload: request ", out.request_id, " finished (",
                                                generator::FinishReasonName(out.finish_reason),
                                                ") after ", out.tokens.size(), " of ", max_tokens,
                                                " tokens"));
      }
      result.num_preemptions += out.num_preemptions;
      result.tokens[prompt_of_request.at(out.request_id)] = std::move(out.tokens);
      ++num_finished;
    }
  }
  if (num_finished != batch || result.num_steps != max_tokens) {
    return absl::InternalError(
        absl::StrCat("workload: ", num_finished, " of ", batch, " requests finished in ",
                     result.num_steps, " steps; expected one prefill step and ", max_tokens - 1,
                     " decode steps (is the step token budget below batch x prompt_len?)"));
  }
  result.decode_tokens = batch * (max_tokens - 1);
  return result;
}

}  // namespace lockstep::bench
