// Reading and writing LibTorch tensors as safetensors files and as Hugging Face
// checkpoint folders.
//
// A folder holds either one `model.safetensors`, or shards
// `model-00001-of-0000N.safetensors` listed in `model.safetensors.index.json`:
//   {"metadata": {"total_size": <bytes>},
//    "weight_map": {"<tensor name>": "<shard file>", ...}}
// Files written here load unchanged in Hugging Face tooling (folders carry the
// `{"format": "pt"}` metadata that transformers checks), and files written by
// Hugging Face tooling load here.
//
// Status codes (header parsing follows the same policy):
//   kDataLoss         a file exists but is not a valid safetensors file or
//                     index, or the shards disagree with the index.
//   kNotFound         a file the caller or the index names does not exist.
//   kInvalidArgument  the caller passed something unusable: an undefined or
//                     sparse tensor, a dtype safetensors cannot store, a
//                     non-floating `convert_floats_to`, a non-positive shard
//                     size, the reserved name "__metadata__".
//   Other failures keep the operating system's code (absl::ErrnoToStatus, e.g.
//   kPermissionDenied) or report LibTorch failures as kInternal
//   (kResourceExhausted when an allocation fails).
// Every message names the file and, where one is involved, the tensor.
//
// Thread safety: no shared state; concurrent calls on different paths are
// safe.
#ifndef LOCKSTEP_MODEL_SAFETENSORS_H_
#define LOCKSTEP_MODEL_SAFETENSORS_H_

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/safetensors_header.h"

namespace lockstep {

// Tensors by Hugging Face parameter name; std::map keeps iteration ordered.
using TensorMap = std::map<std::string, torch::Tensor>;

inline constexpr char kSafetensorsFileName[] = "model.safetensors";
inline constexpr char kSafetensorsIndexFileName[] = "model.safetensors.index.json";

// The LibTorch dtype of a safetensors dtype (F32 → kFloat, BF16 → kBFloat16,
// F16 → kHalf, F64 → kDouble, I64 → kLong, I32 → kInt, I16 → kShort, I8 →
// kChar, U8 → kByte, BOOL → kBool).
torch::Dtype ToTorchDtype(SafetensorsDtype dtype);
// The inverse; kInvalidArgument for dtypes safetensors (as supported here)
// cannot store, e.g. complex or quantized types.
absl::StatusOr<SafetensorsDtype> ToSafetensorsDtype(torch::Dtype dtype);

// Reads every tensor of the safetensors file at `path` (memory-mapped, unmapped
// before returning). Returns contiguous CPU tensors that own their memory.
// Floating-point tensors (F32, BF16, F16 and F64) are converted to
// `convert_floats_to` when it is given (it must be a floating dtype, else
// kInvalidArgument); integer and BOOL tensors keep their dtype. kNotFound if
// the file does not exist; kDataLoss if it is not a valid safetensors file.
// Never crashes on malformed files.
absl::StatusOr<TensorMap> ReadSafetensorsFile(
    const std::filesystem::path& path,
    std::optional<torch::Dtype> convert_floats_to = std::nullopt);

// Loads a checkpoint folder: `model.safetensors` if present (Hugging Face's
// precedence), else the shards listed in `model.safetensors.index.json`. Shard
// headers are all checked before any tensor is read. Errors: kNotFound when
// neither file exists or a listed shard is missing; kDataLoss for a malformed
// index (including shard names that leave the folder), a tensor the weight_map
// lists but its shard lacks, a shard tensor that the weight_map does not list
// or maps to another shard, or a name present in two shards.
// `convert_floats_to` as above.
absl::StatusOr<TensorMap> LoadSafetensorsDir(
    const std::filesystem::path& dir, std::optional<torch::Dtype> convert_floats_to = std::nullopt);

// Where ReadSafetensorsDirInto puts one tensor of a checkpoint: a contiguous CPU tensor of
// entry.NumElements() elements (a floating entry is converted to a floating destination dtype;
// other entries must match it exactly), an undefined tensor to skip the entry, or an error, which
// ends the read and is returned as it is.
using SafetensorsDestination =
    std::function<absl::StatusOr<torch::Tensor>(const SafetensorsEntry& entry)>;

// Reads the checkpoint folder `dir` (the files and checks of LoadSafetensorsDir) straight into
// the caller's tensors, entry by entry in file order, without building a TensorMap: the file is
// copied out 8 MiB at a time and each piece's pages leave the resident set once copied, so a
// load costs the destinations' memory and no more. On an error, destinations already filled
// keep what was copied.
absl::Status ReadSafetensorsDirInto(const std::filesystem::path& dir,
                                    const SafetensorsDestination& destination);

// Writes `tensors` to `path` in their own dtypes (a contiguous CPU copy is made
// per tensor, one at a time, so GPU tensors need no extra device memory). The
// layout is the reference implementation's: tensors ordered by descending dtype
// alignment then by name, so that every tensor's data is aligned to its element
// size; header padded with spaces to a multiple of 8. Atomic: writes `path` +
// ".tmp", fsyncs it, then renames it over `path`; on failure `path` is
// untouched and the temporary file removed.
absl::Status WriteSafetensorsFile(const std::filesystem::path& path, const TensorMap& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Writes a Hugging Face checkpoint folder (created if needed). If the tensors'
// total byte size is at most `max_shard_bytes`, writes one `model.safetensors`;
// otherwise fills shards `model-0000i-of-0000N.safetensors` greedily in name
// order, starting a new shard when the next tensor would exceed
// `max_shard_bytes` (a tensor larger than that gets a shard of its own), then
// writes `model.safetensors.index.json` with metadata.total_size (the sum of
// tensor bytes). Each file is written atomically; stale `model.safetensors`,
// index and `model-*-of-*.safetensors` files from an earlier write are removed
// afterwards so they cannot shadow the new ones. The folder as a whole is not
// atomic: callers wanting that write a fresh folder and rename it.
// kInvalidArgument if `max_shard_bytes` <= 0.
absl::Status WriteSafetensorsDir(const std::filesystem::path& dir, const TensorMap& tensors,
                                 int64_t max_shard_bytes);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_SAFETENSORS_H_
