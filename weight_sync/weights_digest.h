// WeightsSha256: one SHA-256 over a whole parameter set, so that two processes can show that
// their weights are bit-identical (the trainer's and every generator's GetStatus report it) and
// users debugging a parity mismatch can tell "different weights" from "different math".
//
// Hashed, for every tensor in name order (TensorMap is sorted):
//   name, '\0', dtype name, '\0', rank and each dimension as little-endian int64, then the
//   tensor's raw bytes (contiguous, row-major).
// Equal digests mean equal names, shapes, dtypes and bits.
//
// Thread safety: a pure function; the tensors must not change while it runs.
#ifndef LOCKSTEP_WEIGHT_SYNC_WEIGHTS_DIGEST_H_
#define LOCKSTEP_WEIGHT_SYNC_WEIGHTS_DIGEST_H_

#include <string>

#include "model/safetensors.h"

namespace lockstep::weight_sync {

// Lower-case hex SHA-256 (64 characters) of `params` as described above. CPU tensors only
// (others are copied to the CPU first). O(total bytes): ~1 s per GB.
std::string WeightsSha256(const TensorMap& params);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_WEIGHTS_DIGEST_H_
