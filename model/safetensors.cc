#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/mapped_file.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// safetensors data is little-endian; tensors are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes little-endian");

struct DtypePair {
  SafetensorsDtype safetensors;
  torch::Dtype torch;
  // Writers list tensors by descending rank: the reference implementation's
  // dtype order (by alignment, ties broken by its enum order), which keeps
  // every tensor's data aligned to its element size.
  int alignment_rank;
};
constexpr DtypePair kDtypePairs[] = {
    {SafetensorsDtype::kBool, torch::kBool, 0},  {SafetensorsDtype::kU8, torch::kByte, 1},
    {SafetensorsDtype::kI8, torch::kChar, 2},    {SafetensorsDtype::kI16, torch::kShort, 3},
    {SafetensorsDtype::kF16, torch::kHalf, 4},   {SafetensorsDtype::kBF16, torch::kBFloat16, 5},
    {SafetensorsDtype::kI32, torch::kInt, 6},    {SafetensorsDtype::kF32, torch::kFloat, 7},
    {SafetensorsDtype::kF64, torch::kDouble, 8}, {SafetensorsDtype::kI64, torch::kLong, 9},
};

int AlignmentRank(SafetensorsDtype dtype) {
  for (const DtypePair& pair : kDtypePairs) {
    if (pair.safetensors == dtype) return pair.alignment_rank;
  }
  return 0;
}

// `status` with "<context>: " prepended to its message.
absl::Status WithContext(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// Every file written by WriteSafetensorsDir carries this; transformers refuses
// files whose "format" metadata is something else.
const std::map<std::string, std::string>& HuggingFaceMetadata() {
  static const auto* metadata = new std::map<std::string, std::string>{{"format", "pt"}};
  return *metadata;
}

absl::Status ErrnoError(int error_number, const fs::path& path, const char* action) {
  return absl::ErrnoToStatus(error_number, absl::StrCat(path.string(), ": cannot ", action));
}

// A mapped safetensors file with its validated header.
struct MappedSafetensors {
  fs::path path;
  std::unique_ptr<MappedFile> file;
  SafetensorsHeader header;
};

absl::StatusOr<MappedSafetensors> OpenSafetensors(const fs::path& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader((*file)->bytes(), path.string());
  if (!header.ok()) return header.status();
  return MappedSafetensors{path, *std::move(file), *std::move(header)};
}

absl::Status CheckConversionDtype(std::optional<torch::Dtype> convert_floats_to) {
  if (convert_floats_to && !c10::isFloatingType(*convert_floats_to)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convert_floats_to must be a floating dtype, not ", c10::toString(*convert_floats_to)));
  }
  return absl::OkStatus();
}

// Bytes copied out of a mapping between two releases of its pages (see MappedFile::Release).
constexpr int64_t kCopyChunkBytes = int64_t{8} << 20;

// Copies `entry` out of the mapping into `destination` (contiguous CPU, entry.NumElements()
// elements; floating entries may be converted to a floating destination dtype, others must
// match), 8 MiB at a time, releasing each piece's file pages once it is copied.
absl::Status CopyEntryInto(const MappedSafetensors& mapped, const SafetensorsEntry& entry,
                           const torch::Tensor& destination) {
  const std::string where = absl::StrCat(mapped.path.string(), ": tensor '", entry.name, "'");
  if (!destination.defined() || !destination.is_cpu() || !destination.is_contiguous() ||
      destination.numel() != entry.NumElements()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the destination is not a contiguous CPU tensor of ",
                     entry.NumElements(), " elements"));
  }
  // BOOL is read as bytes and then compared with 0: a byte other than 0 or 1 in a file must not
  // become an invalid bool value.
  const bool is_bool = entry.dtype == SafetensorsDtype::kBool;
  const torch::Dtype file_dtype = is_bool ? torch::kByte : ToTorchDtype(entry.dtype);
  const bool converts = destination.scalar_type() != (is_bool ? torch::kBool : file_dtype);
  if (converts && !(IsFloatingSafetensorsDtype(entry.dtype) &&
                    c10::isFloatingType(destination.scalar_type()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is ", std::string(SafetensorsDtypeName(entry.dtype)),
                     ", the destination ", c10::toString(destination.scalar_type())));
  }
  try {
    const int64_t element_bytes = static_cast<int64_t>(c10::elementSize(file_dtype));
    const int64_t chunk = std::max<int64_t>(1, kCopyChunkBytes / element_bytes);
    const size_t base = mapped.header.data_offset + static_cast<size_t>(entry.begin);
    torch::Tensor flat = destination.view({-1});
    for (int64_t first = 0; first < entry.NumElements(); first += chunk) {
      const int64_t count = std::min(chunk, entry.NumElements() - first);
      const size_t offset = base + static_cast<size_t>(first * element_bytes);
      void* source = const_cast<char*>(mapped.file->bytes().data() + offset);
      torch::Tensor piece = torch::from_blob(source, {count}, torch::dtype(file_dtype));
      torch::Tensor target = flat.narrow(0, first, count);
      if (is_bool) {
        target.copy_(piece.ne(0));
      } else if (converts) {
        target.copy_(piece);
      } else {
        std::memcpy(target.data_ptr(), source, static_cast<size_t>(count * element_bytes));
      }
      mapped.file->Release(offset, static_cast<size_t>(count * element_bytes));
    }
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(where, ": ", e.what_without_backtrace()));
  }
}

// Copies one tensor out of the mapping into memory the returned tensor owns.
absl::StatusOr<torch::Tensor> CopyTensor(const MappedSafetensors& mapped,
                                         const SafetensorsEntry& entry,
                                         std::optional<torch::Dtype> convert_floats_to) {
  torch::Dtype dtype = ToTorchDtype(entry.dtype);
  if (convert_floats_to && IsFloatingSafetensorsDtype(entry.dtype)) {
    dtype = *convert_floats_to;
  }
  torch::Tensor tensor;
  try {
    tensor = torch::empty(entry.shape, torch::dtype(dtype));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(mapped.path.string(), ": tensor '", entry.name,
                                            "': ", e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(mapped.path.string(), ": tensor '", entry.name, "': out of memory"));
  }
  if (absl::Status s = CopyEntryInto(mapped, entry, tensor); !s.ok()) return s;
  return tensor;
}

absl::Status CopyAllTensors(const MappedSafetensors& mapped,
                            std::optional<torch::Dtype> convert_floats_to, TensorMap& tensors) {
  for (const SafetensorsEntry& entry : mapped.header.entries) {
    absl::StatusOr<torch::Tensor> tensor = CopyTensor(mapped, entry, convert_floats_to);
    if (!tensor.ok()) return tensor.status();
    tensors[entry.name] = *std::move(tensor);
  }
  return absl::OkStatus();
}

// weight_map of a model.safetensors.index.json: tensor name → shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const fs::path& index_path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(index_path);
  if (!file.ok()) return file.status();
  const std::string_view text = (*file)->bytes();
  const nlohmann::json index = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                                     /*allow_exceptions=*/false);
  const std::string source = index_path.string();
  if (index.is_discarded() || !index.is_object()) {
    return absl::DataLossError(absl::StrCat(source, ": not a JSON object"));
  }
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object()) {
    return absl::DataLossError(absl::StrCat(source, ": missing object \"weight_map\""));
  }
  std::map<std::string, std::string> shard_of;
  for (const auto& [name, shard] : weight_map->items()) {
    // Shards are plain file names beside the index; anything else could leave
    // the folder.
    if (!shard.is_string() || shard.get_ref<const std::string&>().empty() ||
        shard.get_ref<const std::string&>().find('/') != std::string::npos || shard == "." ||
        shard == "..") {
      return absl::DataLossError(absl::StrCat(source, ": tensor '", name, "': weight_map value ",
                                              shard.dump(), " is not a shard file name"));
    }
    shard_of.emplace(name, shard.get<std::string>());
  }
  return shard_of;
}

// Opens the shards listed by the index at `index_path` and checks them against it (see
// LoadSafetensorsDir); no tensor data is read.
absl::StatusOr<std::vector<MappedSafetensors>> OpenShards(const fs::path& index_path) {
  absl::StatusOr<std::map<std::string, std::string>> shard_of = ReadWeightMap(index_path);
  if (!shard_of.ok()) return shard_of.status();
  const std::string index_name = index_path.string();
  // Shard file → the tensor names the weight_map puts there.
  std::map<std::string, std::set<std::string>> names_in_shard;
  for (const auto& [name, shard] : *shard_of) {
    names_in_shard[shard].insert(name);
  }
  // All shard headers are checked against the index before any data is read.
  std::vector<MappedSafetensors> shards;
  std::map<std::string, std::string> found_in;  // Tensor → first shard.
  for (const auto& [shard, names] : names_in_shard) {
    const fs::path shard_path = index_path.parent_path() / shard;
    absl::StatusOr<MappedSafetensors> mapped = OpenSafetensors(shard_path);
    if (!mapped.ok()) {
      if (absl::IsNotFound(mapped.status())) {
        return absl::NotFoundError(
            absl::StrCat(shard_path.string(), ": shard listed in ", index_name, " does not exist"));
      }
      return mapped.status();
    }
    for (const SafetensorsEntry& entry : mapped->header.entries) {
      auto [it, inserted] = found_in.emplace(entry.name, shard);
      if (!inserted) {
        return absl::DataLossError(absl::StrCat(shard_path.string(), ": tensor '", entry.name,
                                                "' also appears in shard '", it->second, "'"));
      }
    }
    shards.push_back(*std::move(mapped));
  }
  // Shard tensors that the index does not list, or lists elsewhere.
  for (const MappedSafetensors& mapped : shards) {
    const std::string shard = mapped.path.filename().string();
    for (const SafetensorsEntry& entry : mapped.header.entries) {
      auto listed = shard_of->find(entry.name);
      if (listed == shard_of->end()) {
        return absl::DataLossError(absl::StrCat(mapped.path.string(), ": tensor '", entry.name,
                                                "' is not listed in the weight_map of ",
                                                index_name));
      }
      if (listed->second != shard) {
        return absl::DataLossError(absl::StrCat(mapped.path.string(), ": tensor '", entry.name,
                                                "' is mapped to shard '", listed->second, "' by ",
                                                index_name));
      }
    }
  }
  // Every shard tensor is now where the index says, so a listed name that no
  // shard holds is missing from the shard the index names.
  for (const auto& [name, shard] : *shard_of) {
    if (found_in.count(name) == 0) {
      return absl::DataLossError(absl::StrCat((index_path.parent_path() / shard).string(),
                                              ": tensor '", name, "' listed in ", index_name,
                                              " is missing from this shard"));
    }
  }
  return shards;
}

// The files of a checkpoint folder, opened and validated: `model.safetensors` if present
// (Hugging Face's precedence), else the shards of `model.safetensors.index.json`.
absl::StatusOr<std::vector<MappedSafetensors>> OpenCheckpointFiles(const fs::path& dir) {
  std::error_code error;
  const fs::path single = dir / kSafetensorsFileName;
  if (fs::exists(single, error)) {
    absl::StatusOr<MappedSafetensors> mapped = OpenSafetensors(single);
    if (!mapped.ok()) return mapped.status();
    std::vector<MappedSafetensors> files;
    files.push_back(*std::move(mapped));
    return files;
  }
  const fs::path index = dir / kSafetensorsIndexFileName;
  if (fs::exists(index, error)) return OpenShards(index);
  return absl::NotFoundError(absl::StrCat(dir.string(), ": neither ", kSafetensorsFileName, " nor ",
                                          kSafetensorsIndexFileName, " exists"));
}

// Writes all of `size` bytes, retrying short writes and EINTR.
absl::Status WriteBytes(int fd, const char* data, size_t size, const fs::path& path) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, path, "write");
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

// Creates `path`.tmp, lets `write_contents` fill it, fsyncs it and renames it
// over `path`. The temporary file is removed on any failure.
absl::Status WriteAtomically(const fs::path& path,
                             const std::function<absl::Status(int fd)>& write_contents) {
  const fs::path temporary = fs::path(path.string() + ".tmp");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, temporary, "create");
  absl::Status status = write_contents(fd);
  if (status.ok() && ::fsync(fd) != 0) {
    status = ErrnoError(errno, temporary, "fsync");
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoError(errno, temporary, "close");
  }
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, path, "rename the temporary file to");
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  // Make the rename durable; a failure here still leaves a complete file.
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (const int dir_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

// Validates a tensor to be written and returns its safetensors dtype.
absl::StatusOr<SafetensorsDtype> WritableDtype(const std::string& name,
                                               const torch::Tensor& tensor) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is undefined"));
  }
  if (tensor.layout() != torch::kStrided) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is not dense"));
  }
  absl::StatusOr<SafetensorsDtype> dtype = ToSafetensorsDtype(tensor.scalar_type());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': ", dtype.status().message()));
  }
  return dtype;
}

bool IsShardFileName(const std::string& name) {
  // model-NNNNN-of-NNNNN.safetensors
  constexpr std::string_view kPattern = "model-#####-of-#####.safetensors";
  if (name.size() != kPattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool ok =
        kPattern[i] == '#' ? (name[i] >= '0' && name[i] <= '9') : name[i] == kPattern[i];
    if (!ok) return false;
  }
  return true;
}

// Removes checkpoint files in `dir` left by an earlier write that are not in
// `keep`.
absl::Status RemoveStaleFiles(const fs::path& dir, const std::set<std::string>& keep) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool is_checkpoint_file =
        name == kSafetensorsFileName || name == kSafetensorsIndexFileName || IsShardFileName(name);
    if (is_checkpoint_file && keep.count(name) == 0 && !fs::remove(entry.path(), error)) {
      return ErrnoError(error.value(), entry.path(), "remove stale file");
    }
  }
  if (error) return ErrnoError(error.value(), dir, "list");
  return absl::OkStatus();
}

}  // namespace

torch::Dtype ToTorchDtype(SafetensorsDtype dtype) {
  for (const DtypePair& pair : kDtypePairs) {
    if (pair.safetensors == dtype) return pair.torch;
  }
  return torch::kFloat;  // Unreachable for valid enum values.
}

absl::StatusOr<SafetensorsDtype> ToSafetensorsDtype(torch::Dtype dtype) {
  for (const DtypePair& pair : kDtypePairs) {
    if (pair.torch == dtype) return pair.safetensors;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype ", c10::toString(dtype), " has no safetensors equivalent"));
}

absl::StatusOr<TensorMap> ReadSafetensorsFile(const fs::path& path,
                                              std::optional<torch::Dtype> convert_floats_to) {
  if (absl::Status status = CheckConversionDtype(convert_floats_to); !status.ok()) {
    return status;
  }
  absl::StatusOr<MappedSafetensors> mapped = OpenSafetensors(path);
  if (!mapped.ok()) return mapped.status();
  TensorMap tensors;
  if (absl::Status status = CopyAllTensors(*mapped, convert_floats_to, tensors); !status.ok()) {
    return status;
  }
  return tensors;
}

absl::StatusOr<TensorMap> LoadSafetensorsDir(const fs::path& dir,
                                             std::optional<torch::Dtype> convert_floats_to) {
  if (absl::Status status = CheckConversionDtype(convert_floats_to); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::vector<MappedSafetensors>> files = OpenCheckpointFiles(dir);
  if (!files.ok()) return files.status();
  TensorMap tensors;
  for (const MappedSafetensors& mapped : *files) {
    if (absl::Status status = CopyAllTensors(mapped, convert_floats_to, tensors); !status.ok()) {
      return status;
    }
  }
  return tensors;
}

absl::Status ReadSafetensorsDirInto(const fs::path& dir,
                                    const SafetensorsDestination& destination) {
  absl::StatusOr<std::vector<MappedSafetensors>> files = OpenCheckpointFiles(dir);
  if (!files.ok()) return files.status();
  for (const MappedSafetensors& mapped : *files) {
    for (const SafetensorsEntry& entry : mapped.header.entries) {
      absl::StatusOr<torch::Tensor> target = destination(entry);
      if (!target.ok()) return target.status();
      if (!target->defined()) continue;
      if (absl::Status s = CopyEntryInto(mapped, entry, *target); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteSafetensorsFile(const fs::path& path, const TensorMap& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  const std::string source = path.string();
  struct Planned {
    const std::string* name;
    const torch::Tensor* tensor;
    SafetensorsDtype dtype;
  };
  std::vector<Planned> order;
  for (const auto& [name, tensor] : tensors) {
    absl::StatusOr<SafetensorsDtype> dtype = WritableDtype(name, tensor);
    if (!dtype.ok()) return WithContext(dtype.status(), source);
    order.push_back({&name, &tensor, *dtype});
  }
  // `tensors` is sorted by name, so a stable sort yields (rank desc, name).
  std::stable_sort(order.begin(), order.end(), [](const Planned& a, const Planned& b) {
    return AlignmentRank(a.dtype) > AlignmentRank(b.dtype);
  });
  std::vector<SafetensorsEntry> entries;
  int64_t offset = 0;
  for (const Planned& planned : order) {
    SafetensorsEntry entry{*planned.name, planned.dtype, planned.tensor->sizes().vec(), offset,
                           offset + planned.tensor->numel() * SafetensorsDtypeSize(planned.dtype)};
    offset = entry.end;
    entries.push_back(std::move(entry));
  }
  absl::StatusOr<std::string> header = EncodeSafetensorsHeader(entries, metadata);
  if (!header.ok()) return WithContext(header.status(), source);
  return WriteAtomically(path, [&](int fd) -> absl::Status {
    absl::Status status = WriteBytes(fd, header->data(), header->size(), path);
    for (size_t i = 0; i < order.size() && status.ok(); ++i) {
      if (entries[i].NumBytes() == 0) continue;
      try {
        const torch::Tensor cpu = order[i].tensor->detach().to(torch::kCPU).contiguous();
        status = WriteBytes(fd, static_cast<const char*>(cpu.data_ptr()),
                            static_cast<size_t>(entries[i].NumBytes()), path);
      } catch (const c10::Error& e) {
        status = absl::InternalError(
            absl::StrCat(source, ": tensor '", entries[i].name, "': ", e.what_without_backtrace()));
      }
    }
    return status;
  });
}

absl::Status WriteSafetensorsDir(const fs::path& dir, const TensorMap& tensors,
                                 int64_t max_shard_bytes) {
  if (max_shard_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir.string(), ": max_shard_bytes must be positive, not ", max_shard_bytes));
  }
  // Assign shards in name order, validating before touching the disk.
  std::vector<TensorMap> shards(1);
  int64_t total_bytes = 0, shard_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    absl::StatusOr<SafetensorsDtype> dtype = WritableDtype(name, tensor);
    if (!dtype.ok()) return WithContext(dtype.status(), dir.string());
    const int64_t bytes = tensor.numel() * SafetensorsDtypeSize(*dtype);
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace(name, tensor);
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return ErrnoError(error.value(), dir, "create directory");

  if (shards.size() == 1) {
    absl::Status status =
        WriteSafetensorsFile(dir / kSafetensorsFileName, tensors, HuggingFaceMetadata());
    if (!status.ok()) return status;
    return RemoveStaleFiles(dir, {kSafetensorsFileName});
  }
  std::set<std::string> written;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string shard =
        absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, shards.size());
    absl::Status status = WriteSafetensorsFile(dir / shard, shards[i], HuggingFaceMetadata());
    if (!status.ok()) return status;
    for (const auto& [name, tensor] : shards[i]) weight_map[name] = shard;
    written.insert(shard);
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}},
                                {"weight_map", weight_map}};
  std::string text;
  try {
    text = index.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir.string(), ": a tensor name is not valid UTF-8: ", e.what()));
  }
  const fs::path index_path = dir / kSafetensorsIndexFileName;
  absl::Status status = WriteAtomically(
      index_path, [&](int fd) { return WriteBytes(fd, text.data(), text.size(), index_path); });
  if (!status.ok()) return status;
  written.insert(kSafetensorsIndexFileName);
  return RemoveStaleFiles(dir, written);
}

}  // namespace lockstep
