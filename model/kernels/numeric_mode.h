// The numeric mode of a model instance.
//  kFast:           stock LibTorch ops (BLAS, vectorised reductions): fastest, but a token's
//                   result may change in the last bits with the batch it is computed in.
//  kBatchInvariant: the kernels in this folder: every reduction runs in one fixed order that
//                   depends only on the reduced length, so trainer and generator agree bit for bit.
#ifndef LOCKSTEP_MODEL_KERNELS_NUMERIC_MODE_H_
#define LOCKSTEP_MODEL_KERNELS_NUMERIC_MODE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

enum class NumericMode { kFast, kBatchInvariant };

inline absl::StatusOr<NumericMode> ParseNumericMode(absl::string_view name) {
  if (name == "fast") return NumericMode::kFast;
  if (name == "batch_invariant") return NumericMode::kBatchInvariant;
  return absl::InvalidArgumentError("numeric mode must be \"fast\" or \"batch_invariant\"");
}

inline const char* NumericModeName(NumericMode mode) {
  return mode == NumericMode::kFast ? "fast" : "batch_invariant";
}

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_KERNELS_NUMERIC_MODE_H_
