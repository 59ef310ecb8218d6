// One execution path of `lockstep diagnose`: which forward computes the log-probs (the trainer's
// training forward or the generator's prefill + decode) and under which numerics and batching.
// Written on the command line as `key=value` pairs separated by commas:
//   path=train|generate  mode=fast|batch_invariant  threads=N  dtype=float32|bfloat16
//   pack=N (sequences per packed training batch)  chunk=N (prefill tokens per engine step)
//   batch=N (sequences per decode step: the compared ones plus filler sequences)
#ifndef LOCKSTEP_DIAGNOSE_PATH_SETTINGS_H_
#define LOCKSTEP_DIAGNOSE_PATH_SETTINGS_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/kernels/numeric_mode.h"

namespace lockstep::diagnose {

enum class PathKind { kTrain, kGenerate };
const char* PathKindName(PathKind kind);

struct PathSettings {
  PathKind path = PathKind::kTrain;
  NumericMode mode = NumericMode::kBatchInvariant;
  int threads = 0;  // 0 = DefaultComputeThreads()
  torch::Dtype dtype = torch::kFloat32;
  int64_t pack = 1;     // train: sequences per packed batch (fillers complete the last one)
  int64_t chunk = 512;  // generate: the scheduler's token budget per step (prefill chunk size)
  int64_t batch = 1;    // generate: sequences per continuous batch (fillers make up the rest)

  // "path=train,mode=batch_invariant,threads=0,dtype=float32,pack=1" (the keys that apply).
  std::string ToString() const;
};

// Applies `text` ("key=value,key=value", may be empty) on top of `base`. InvalidArgument naming
// the key for an unknown key, a bad value, a setting that does not apply to the path (pack for
// generate; chunk or batch for train), or batch_invariant with a dtype other than float32.
absl::StatusOr<PathSettings> ParsePathSettings(const std::string& text, const PathSettings& base);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_PATH_SETTINGS_H_
