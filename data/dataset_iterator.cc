#include "data/dataset_iterator.h"

#include <numeric>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): x += golden gamma; z = mix(x).
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) by rejection, so no modulo bias.
uint64_t UniformBelow(uint64_t bound, uint64_t* state) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t value;
  do {
    value = SplitMix64(state);
  } while (value >= limit);
  return value % bound;
}

}  // namespace

std::vector<int64_t> EpochOrder(uint64_t seed, int64_t epoch, int64_t num_examples) {
  std::vector<int64_t> order(num_examples);
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed;
  state = SplitMix64(&state) ^ static_cast<uint64_t>(epoch);
  for (int64_t i = num_examples - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(UniformBelow(static_cast<uint64_t>(i) + 1, &state));
    std::swap(order[i], order[j]);
  }
  return order;
}

nlohmann::json DatasetCursor::ToJson() const {
  // The seed is a string: JSON readers elsewhere may hold numbers as doubles.
  return {{"seed", std::to_string(seed)},
          {"epoch", epoch},
          {"position", position},
          {"num_examples", num_examples}};
}

absl::StatusOr<DatasetCursor> DatasetCursor::FromJson(const nlohmann::json& json) {
  DatasetCursor cursor;
  if (!json.is_object() || !json.contains("seed") || !json["seed"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("bad dataset cursor: ", json.dump()));
  }
  for (const char* key : {"epoch", "position", "num_examples"}) {
    if (!json.contains(key) || !json[key].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("bad dataset cursor: ", json.dump()));
    }
  }
  const std::string& seed = json["seed"].get_ref<const std::string&>();
  size_t parsed = 0;
  try {
    cursor.seed = std::stoull(seed, &parsed);
  } catch (const std::exception&) {
    parsed = 0;
  }
  if (parsed == 0 || parsed != seed.size()) {
    return absl::InvalidArgumentError(absl::StrCat("bad dataset cursor seed: ", seed));
  }
  cursor.epoch = json["epoch"].get<int64_t>();
  cursor.position = json["position"].get<int64_t>();
  cursor.num_examples = json["num_examples"].get<int64_t>();
  return cursor;
}

DatasetIterator::DatasetIterator(const Dataset* dataset, uint64_t seed)
    : dataset_(dataset),
      seed_(seed),
      order_(EpochOrder(seed, 0, static_cast<int64_t>(dataset->num_examples()))) {}

absl::StatusOr<DatasetIterator> DatasetIterator::Restore(const Dataset* dataset,
                                                         const DatasetCursor& cursor) {
  const int64_t num_examples = static_cast<int64_t>(dataset->num_examples());
  if (cursor.num_examples != num_examples) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset cursor is for ", cursor.num_examples, " examples but ",
                     dataset->source(), " has ", num_examples));
  }
  if (cursor.epoch < 0 || cursor.position < 0 || cursor.position > num_examples) {
    return absl::InvalidArgumentError(absl::StrCat("dataset cursor out of range: ",
                                                   cursor.ToJson().dump()));
  }
  DatasetIterator iterator(dataset, cursor.seed);
  iterator.epoch_ = cursor.epoch;
  iterator.position_ = cursor.position;
  iterator.order_ = EpochOrder(cursor.seed, cursor.epoch, num_examples);
  return iterator;
}

const Example& DatasetIterator::Next() {
  if (position_ == static_cast<int64_t>(order_.size())) {
    ++epoch_;
    position_ = 0;
    order_ = EpochOrder(seed_, epoch_, static_cast<int64_t>(order_.size()));
  }
  return dataset_->example(order_[position_++]);
}

DatasetCursor DatasetIterator::cursor() const {
  return DatasetCursor{seed_, epoch_, position_, static_cast<int64_t>(order_.size())};
}

}  // namespace lockstep
