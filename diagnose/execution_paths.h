// The two ways lockstep computes a token's log-prob, as diagnose runs them:
//  - train: the trainer's own function (trainer::ComputeTokenLogprobs), one packed training
//    forward with autograd on per `pack` sequences;
//  - generate: the generator's scheduler, block manager and model runner (the engine's step:
//    schedule, run, commit), with each completion token fed back instead of sampled (teacher
//    forcing) and its log-prob read with the sampler's op, ops::LogSoftmax(logits, T)[token].
// Both report every op of every forward to an OpCapture.
#ifndef LOCKSTEP_DIAGNOSE_EXECUTION_PATHS_H_
#define LOCKSTEP_DIAGNOSE_EXECUTION_PATHS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "diagnose/op_capture.h"
#include "diagnose/path_settings.h"
#include "model/transformer.h"

namespace lockstep::diagnose {

// A sequence to compare: prompt + completion tokens. The log-probs compared are those of the
// completion tokens (tokens[prompt_length ..]); op outputs are compared at positions 0 .. n-2.
struct DiagnoseSequence {
  std::vector<int64_t> tokens;
  int64_t prompt_length = 1;  // >= 1 and < tokens.size()
  int64_t num_completion() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
};

struct PathRun {
  std::vector<std::vector<float>> logprobs;  // per sequence, its completion tokens' log-probs
  std::unique_ptr<OpCapture> capture;
  double seconds = 0;
};

// Runs `sequences` down the path `settings` describes on `model` (whose numeric mode and dtype
// must be the settings'), at `temperature` (> 0). Sets the compute threads to settings.threads.
// Filler sequences (random tokens, deterministic) complete the last packed batch (train) or
// the continuous batch (generate); they are computed but never compared. `perturb` (tests; may
// be null) sees every op output before the capture does. With `observe` false the forwards run
// without an observer and the capture stays empty (the plain forwards, for bench/diagnose).
// Errors: the model's, or Internal.
absl::StatusOr<PathRun> RunPath(Transformer& model, const std::vector<DiagnoseSequence>& sequences,
                                const PathSettings& settings, double temperature,
                                OutputHook* perturb = nullptr, bool observe = true);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_EXECUTION_PATHS_H_
