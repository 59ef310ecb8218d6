// Manifest: the names and shapes of every tensor a weight-sync group carries, sorted by name. It
// is the contract between the sender and the receivers: both derive the bucket plan from it, and
// the rendezvous refuses ranks whose manifests differ.
//
// Thread safety: plain values and pure functions.
#ifndef LOCKSTEP_WEIGHT_SYNC_MANIFEST_H_
#define LOCKSTEP_WEIGHT_SYNC_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/safetensors.h"

namespace lockstep::weight_sync {

struct Manifest {
  // (name, shape), sorted by name, names unique.
  std::vector<std::pair<std::string, std::vector<int64_t>>> entries;

  int64_t num_elements() const;
  bool operator==(const Manifest& other) const { return entries == other.entries; }
};

// The manifest of `params` (TensorMap is ordered by name, so the entries are too).
Manifest ManifestOf(const TensorMap& params);

// A human-readable description of the first difference between `reference` (rank
// `reference_rank`'s) and `other` (rank `other_rank`'s), e.g.
//   "tensor 'model.norm.weight' has shape [64] on rank 0 but [32] on rank 2", or
//   "tensor 'lm_head.weight' exists on rank 0 but not on rank 1";
// nullopt when they are equal.
std::optional<std::string> FirstDifference(const Manifest& reference, int reference_rank,
                                           const Manifest& other, int other_rank);

// One line per entry, "name<TAB>d0,d1,...\n": how ranks exchange manifests through the store.
std::string EncodeManifest(const Manifest& manifest);
// DataLoss naming the line if `text` is not EncodeManifest output.
absl::StatusOr<Manifest> DecodeManifest(const std::string& text);

// InvalidArgument naming the tensor unless `params` holds exactly the manifest's names with its
// shapes (any floating dtype).
absl::Status CheckMatches(const Manifest& manifest, const TensorMap& params);

// Where `params` live, as GroupOptions::cuda_device takes it: -1 when every tensor is in host
// memory (or there is none), the device index when every one is on one CUDA device. A service
// sets its group's cuda_device from its model's weights with it, so `auto` picks the GPU
// transports exactly when the weights are on CUDA. InvalidArgument naming two tensors on
// different devices, or one on a device that is neither.
absl::StatusOr<int> WeightsCudaDevice(const TensorMap& params);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_MANIFEST_H_
