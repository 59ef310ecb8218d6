#include "weight_sync/manifest.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lockstep::weight_sync {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::StatusOr<int> WeightsCudaDevice(const TensorMap& params) {
  if (params.empty()) return -1;
  const auto& [first_name, first] = *params.begin();
  for (const auto& [name, tensor] : params) {
    if (!tensor.is_cpu() && !tensor.is_cuda()) {
      return absl::InvalidArgumentError(absl::StrCat("weights: tensor '", name, "' is on ",
                                                     tensor.device().str(),
                                                     ", neither the CPU nor a CUDA device"));
    }
    if (tensor.device() != first.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weights must live on one device, but '", first_name, "' is on ",
          first.device().str(), " and '", name, "' on ", tensor.device().str()));
    }
  }
  return first.is_cuda() ? static_cast<int>(first.get_device()) : -1;
}

int64_t Manifest::num_elements() const {
  int64_t total = 0;
  for (const auto& [name, shape] : entries) {
    int64_t count = 1;
    for (int64_t dim : shape) count *= dim;
    total += count;
  }
  return total;
}

Manifest ManifestOf(const TensorMap& params) {
  Manifest manifest;
  manifest.entries.reserve(params.size());
  for (const auto& [name, tensor] : params)
    manifest.entries.emplace_back(name, tensor.sizes().vec());
  return manifest;
}

std::optional<std::string> FirstDifference(const Manifest& reference, int reference_rank,
                                           const Manifest& other, int other_rank) {
  const auto& a = reference.entries;
  const auto& b = other.entries;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() || j < b.size()) {
    // Both lists are sorted by name: the smaller name is the one missing on the other side.
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      return absl::StrCat("tensor '", a[i].first, "' exists on rank ", reference_rank,
                          " but not on rank ", other_rank);
    }
    if (i == a.size() || b[j].first < a[i].first) {
      return absl::StrCat("tensor '", b[j].first, "' exists on rank ", other_rank,
                          " but not on rank ", reference_rank);
    }
    if (a[i].second != b[j].second) {
      return absl::StrCat("tensor '", a[i].first, "' has shape ", ShapeString(a[i].second),
                          " on rank ", reference_rank, " but ", ShapeString(b[j].second),
                          " on rank ", other_rank);
    }
    ++i;
    ++j;
  }
  return std::nullopt;
}

std::string EncodeManifest(const Manifest& manifest) {
  std::string text;
  for (const auto& [name, shape] : manifest.entries) {
    absl::StrAppend(&text, name, "\t", absl::StrJoin(shape, ","), "\n");
  }
  return text;
}

absl::StatusOr<Manifest> DecodeManifest(const std::string& text) {
  Manifest manifest;
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_number;
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    if (fields.size() != 2 || fields[0].empty()) {
      return absl::DataLossError(absl::StrCat("manifest line ", line_number, " is malformed"));
    }
    std::vector<int64_t> shape;
    for (absl::string_view dim : absl::StrSplit(fields[1], ',', absl::SkipEmpty())) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(dim, &value) || value < 0) {
        return absl::DataLossError(
            absl::StrCat("manifest line ", line_number, " has a bad dimension '", dim, "'"));
      }
      shape.push_back(value);
    }
    manifest.entries.emplace_back(std::string(fields[0]), std::move(shape));
  }
  return manifest;
}

absl::Status CheckMatches(const Manifest& manifest, const TensorMap& params) {
  if (params.size() != manifest.entries.size()) {
    if (std::optional<std::string> difference =
            FirstDifference(manifest, 0, ManifestOf(params), 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights do not match the group's manifest: ", *difference));
    }
  }
  auto it = params.begin();
  for (const auto& [name, shape] : manifest.entries) {
    if (it == params.end() || it->first != name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weights do not match the group's manifest: tensor '", name, "' is missing"));
    }
    const torch::Tensor& tensor = it->second;
    if (!tensor.defined() || tensor.sizes().vec() != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights do not match the group's manifest: tensor '", name, "' has shape ",
                       tensor.defined() ? c10::str(tensor.sizes()) : "undefined", ", expected ",
                       ShapeString(shape)));
    }
    if (!tensor.is_floating_point()) {
      return absl::InvalidArgumentError(absl::StrCat("weight sync: tensor '", name,
                                                     "' must be floating-point, got ",
                                                     c10::str(tensor.dtype())));
    }
    ++it;
  }
  return absl::OkStatus();
}

}  // namespace lockstep::weight_sync
