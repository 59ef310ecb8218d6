// Deterministic, resumable iteration over a Dataset: every example once per epoch, in an order
// fixed by (seed, epoch) alone, and a cursor that checkpoints store to continue exactly.
#ifndef LOCKSTEP_DATA_DATASET_ITERATOR_H_
#define LOCKSTEP_DATA_DATASET_ITERATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/jsonl_dataset.h"
#include "nlohmann/json.hpp"

namespace lockstep {

// Where an iteration stands. `position` examples of epoch `epoch` have been handed out.
struct DatasetCursor {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t position = 0;
  int64_t num_examples = 0;  // Guards against restoring onto a different dataset.

  nlohmann::json ToJson() const;
  static absl::StatusOr<DatasetCursor> FromJson(const nlohmann::json& json);
  bool operator==(const DatasetCursor& other) const {
    return seed == other.seed && epoch == other.epoch && position == other.position &&
           num_examples == other.num_examples;
  }
};

// The order of epoch `epoch`: a permutation of 0..num_examples-1 (Fisher–Yates driven by
// SplitMix64 seeded from seed and epoch; platform-independent).
std::vector<int64_t> EpochOrder(uint64_t seed, int64_t epoch, int64_t num_examples);

// Not thread-safe. `dataset` is not owned and must outlive the iterator.
class DatasetIterator {
 public:
  DatasetIterator(const Dataset* dataset, uint64_t seed);
  // Continues from `cursor`. FailedPrecondition if the cursor belongs to a dataset of another
  // size; InvalidArgument if it is out of range.
  static absl::StatusOr<DatasetIterator> Restore(const Dataset* dataset, const DatasetCursor& cursor);

  // The next example; crosses into the next epoch (a new order) after the last one.
  const Example& Next();
  // The cursor to save; Restore(dataset, cursor()) continues with the same Next() sequence.
  DatasetCursor cursor() const;
  int64_t epoch() const { return epoch_; }

 private:
  const Dataset* dataset_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_DATASET_ITERATOR_H_
