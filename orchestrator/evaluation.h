// Held-out accuracy through the generators: every eval prompt once, rendered exactly as the
// training prompts are (`format`: chat messages or plain prompts), greedy (temperature 0,
// n = 1), scored with the job's reward. A sample is correct when its reward is >= 1 (the full
// reward of the built-in verifiers); a failed reward item counts as not correct and is counted.
//
// Thread safety: call from one thread; the clients and the scorer are thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_EVALUATION_H_
#define LOCKSTEP_ORCHESTRATOR_EVALUATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/jsonl_dataset.h"
#include "data/prompt_format.h"
#include "model/tokenizer/tokenizer.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/job_summary.h"  // EvalResult
#include "rewards/reward_scorer.h"

namespace lockstep::orchestrator {

// `sampling` gives max_tokens and stop tokens; temperature is forced to 0 and n to 1.
// InvalidArgument naming the file and line of a prompt that cannot be rendered or encoded.
absl::StatusOr<EvalResult> Evaluate(const Dataset& eval, const Tokenizer& tokenizer,
                                    const PromptFormat& format,
                                    const std::vector<GeneratorClient*>& generators,
                                    rewards::RewardScorer& scorer,
                                    const v1::SamplingParams& sampling);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_EVALUATION_H_
