// The decode workload of bench_generator, run through the generator Engine: `batch` requests of
// fixed-length prompts, greedy, no EOS, exactly max_tokens tokens each, all submitted at once.
//
// With a step token budget of at least batch × prompt_len, the first engine step prefills every
// prompt (and samples each sequence's first token); every later step is a pure decode step of one
// token per sequence. Decode throughput counts the tokens of those later steps over their time.
//
// Thread safety: none; call from the thread that owns the engine.
#ifndef LOCKSTEP_BENCH_GENERATOR_ENGINE_WORKLOAD_H_
#define LOCKSTEP_BENCH_GENERATOR_ENGINE_WORKLOAD_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "generator/engine.h"

namespace lockstep::bench {

// CPU seconds used so far by this process (all threads).
double ProcessCpuSeconds();

// Prompt s of a workload: prompt_len token ids, deterministic in (s, t), all below vocab_size.
std::vector<int64_t> WorkloadPrompt(int64_t s, int64_t prompt_len, int64_t vocab_size);

struct WorkloadResult {
  int64_t batch = 0;
  int64_t num_steps = 0;       // engine steps until every request finished
  double prefill_seconds = 0;  // the first step (wall clock)
  double decode_seconds = 0;   // every later step (wall clock)
  // The same spans in CPU time of the whole process (all threads): on a shared, overloaded
  // machine these move far less than wall-clock time.
  double prefill_cpu_seconds = 0;
  double decode_cpu_seconds = 0;
  int64_t decode_tokens = 0;    // tokens sampled in the later steps
  int64_t num_preemptions = 0;  // summed over samples (0 when the KV pool fits the workload)
  std::vector<std::vector<int64_t>> tokens;  // per prompt, in prompt order

  double DecodeTokensPerSecond() const { return decode_tokens / decode_seconds; }
  double DecodeTokensPerCpuSecond() const { return decode_tokens / decode_cpu_seconds; }
  // All generated tokens over prefill + decode time.
  double TokensPerSecond() const {
    return batch * static_cast<double>(tokens.empty() ? 0 : tokens[0].size()) /
           (prefill_seconds + decode_seconds);
  }
};

// Runs the workload to completion on `engine` (which must be idle). Errors: the engine's, or
// Internal when a request finished early or the first step did not prefill every prompt (the
// engine's step budget is too small for the batch).
absl::StatusOr<WorkloadResult> RunDecodeWorkload(generator::Engine& engine, int64_t batch,
                                                 int64_t prompt_len, int64_t max_tokens,
                                                 int64_t vocab_size);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_GENERATOR_ENGINE_WORKLOAD_H_
