// The safetensors header: parsing and encoding, with no LibTorch dependency.
//
// File layout (https://github.com/huggingface/safetensors), little-endian:
//   bytes [0, 8)        N, the header length (unsigned 64-bit integer)
//   bytes [8, 8 + N)    a UTF-8 JSON object, possibly padded with spaces:
//     {"__metadata__": {"key": "value", ...},                 (optional)
//      "name": {"dtype": "F32", "shape": [2, 3],
//               "data_offsets": [begin, end]}, ...}
//   bytes [8 + N, EOF)  the data section; data_offsets are relative to it.
//
// Validation follows the reference implementation and is strict: a file is
// accepted only if every tensor's byte span is exactly shape × dtype size and
// the spans, sorted by offset, tile the data section with no overlap, no gap
// and no trailing bytes. The reference rejects gaps and trailing bytes too, so
// every file Hugging Face tooling writes passes; a file with gaps is corrupt or
// was written by a non-conforming tool.
//
// Status codes (safetensors.h follows the same policy):
//   kDataLoss         the bytes are not a valid safetensors file (every parse
//                     error listed below).
//   kInvalidArgument  the caller passed something unusable (e.g. a tensor name
//                     that is not UTF-8, or the reserved "__metadata__").
//   kNotFound         a named file or tensor does not exist (used by the
//                     LibTorch layer).
// Every message starts with the `source` name (usually the file path) and
// names the tensor when one is involved.
//
// Thread safety: all functions are pure and may be called from any thread.
#ifndef LOCKSTEP_MODEL_SAFETENSORS_HEADER_H_
#define LOCKSTEP_MODEL_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

// The element types lockstep reads and writes. Other safetensors dtypes (F8_*,
// U16, U32, U64) are rejected by the parser as unsupported.
enum class SafetensorsDtype {
  kF32,   // float32
  kBF16,  // bfloat16
  kF16,   // IEEE float16
  kF64,   // float64
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,  // one byte per element, 0 or 1
};

// The header spelling of `dtype`: "F32", "BF16", ..., "BOOL".
std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
// Inverse of SafetensorsDtypeName (case-sensitive); nullopt for other names.
std::optional<SafetensorsDtype> ParseSafetensorsDtype(std::string_view name);
// Bytes per element: 8, 4, 2 or 1.
int64_t SafetensorsDtypeSize(SafetensorsDtype dtype);
// True for F32, BF16, F16 and F64.
bool IsFloatingSafetensorsDtype(SafetensorsDtype dtype);

// One tensor described by the header.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;  // Empty for a scalar; every dimension is >= 0.
  int64_t begin = 0;  // Byte span [begin, end) relative to the data section.
  int64_t end = 0;

  int64_t NumBytes() const { return end - begin; }
  // Product of `shape` (1 for a scalar). Overflow-free for entries returned by
  // the parser.
  int64_t NumElements() const;

  bool operator==(const SafetensorsEntry& other) const;
};

struct SafetensorsHeader {
  // In data-section order: sorted by (begin, end, name).
  std::vector<SafetensorsEntry> entries;
  // The "__metadata__" object; empty when absent or null.
  std::map<std::string, std::string> metadata;
  // Offset of the data section from the start of the file: 8 + N.
  int64_t data_offset = 0;
  // Size of the data section in bytes: the end of the last entry (0 if none).
  int64_t data_size = 0;

  // Returns the entry called `name`, or nullptr. Linear scan.
  const SafetensorsEntry* Find(std::string_view name) const;
};

// Header lengths above this are rejected (the reference's limit too).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses and validates the header of a complete safetensors file held in
// `file_bytes`. `source` names the file in error messages. Never reads outside
// `file_bytes` and never throws. Errors (all kDataLoss): file shorter than 8
// bytes; header length beyond the file or above kMaxSafetensorsHeaderBytes;
// header not valid JSON / UTF-8; JSON not an object; duplicate tensor names;
// "__metadata__" not an object of strings; an entry that is not an object or
// lacks / mistypes "dtype", "shape" or "data_offsets"; unknown dtype; negative,
// non-integer or overflowing shape; shape × dtype size ≠ byte span; begin >
// end; offsets beyond the data section; overlapping spans; gaps between spans;
// trailing bytes after the last span.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    std::string_view file_bytes, std::string_view source);

// Encodes the first 8 + N bytes of a safetensors file: the little-endian length
// and the JSON header ("__metadata__" first when non-empty, then `entries` in
// the given order), padded with spaces so that N is a multiple of 8 and the
// data section starts 8-byte aligned. The caller is responsible for the
// entries' offsets describing the data it writes after the header. Errors
// (kInvalidArgument): the reserved name "__metadata__" or a duplicate tensor
// name, a name or metadata string that is not valid UTF-8, or an entry whose
// span is not shape × dtype size.
absl::StatusOr<std::string> EncodeSafetensorsHeader(
    const std::vector<SafetensorsEntry>& entries,
    const std::map<std::string, std::string>& metadata);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_SAFETENSORS_HEADER_H_
