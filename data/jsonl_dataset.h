// A prompt dataset loaded from a JSON Lines file, fully validated before use: bad lines fail
// the load with "<file>:<line>: <what is wrong>", so a job never starts on bad data.
// Field names may be remapped (DatasetFields), nested ones included, for layouts such as verl's.
#ifndef LOCKSTEP_DATA_JSONL_DATASET_H_
#define LOCKSTEP_DATA_JSONL_DATASET_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/example.h"

namespace lockstep {

// Immutable after loading; safe to share between threads.
class Dataset {
 public:
  explicit Dataset(std::vector<Example> examples, std::string source = "")
      : examples_(std::move(examples)), source_(std::move(source)) {}

  const std::vector<Example>& examples() const { return examples_; }
  const Example& example(size_t index) const { return examples_[index]; }
  size_t num_examples() const { return examples_.size(); }
  // Where the examples came from (a file path), for messages.
  const std::string& source() const { return source_; }

 private:
  std::vector<Example> examples_;
  std::string source_;
};

// Loads `path`, reading each row's prompt and answer where `fields` says. Blank lines are
// skipped. InvalidArgument "<file>:<line>: ..." for each line (the first 10 named, the rest
// counted) that is not valid UTF-8 (with the byte's column), not a JSON object, or lacks a
// mapped field; an empty dataset is an error.
absl::StatusOr<Dataset> LoadJsonlDataset(const std::filesystem::path& path,
                                         const DatasetFields& fields = {});

}  // namespace lockstep

#endif  // LOCKSTEP_DATA_JSONL_DATASET_H_
