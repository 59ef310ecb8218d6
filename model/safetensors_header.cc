#include "model/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  int64_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::kF32, "F32", 4}, {SafetensorsDtype::kBF16, "BF16", 2},
    {SafetensorsDtype::kF16, "F16", 2}, {SafetensorsDtype::kF64, "F64", 8},
    {SafetensorsDtype::kI64, "I64", 8}, {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kI16, "I16", 2}, {SafetensorsDtype::kI8, "I8", 1},
    {SafetensorsDtype::kU8, "U8", 1},   {SafetensorsDtype::kBool, "BOOL", 1},
};

const DtypeInfo& Info(SafetensorsDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info;
  }
  return kDtypes[0];  // Unreachable for valid enum values.
}

// Debian's Abseil has its own absl::string_view, which StrCat needs.
absl::string_view AbslView(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

template <typename... Parts>
absl::Status DataLoss(std::string_view source, const Parts&... parts) {
  return absl::DataLossError(absl::StrCat(AbslView(source), ": ", parts...));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// shape product × element size, or nullopt on int64 overflow or a negative
// dimension.
std::optional<int64_t> CheckedNumBytes(const std::vector<int64_t>& shape,
                                       SafetensorsDtype dtype) {
  int64_t total = SafetensorsDtypeSize(dtype);
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(total, dim, &total))
      return std::nullopt;
  }
  return total;
}

// The value of a JSON integer in [0, INT64_MAX]; nullopt for anything else
// (negative numbers, floats such as 2.0 or 1e30, strings, ...).
std::optional<int64_t> AsNonNegativeInt64(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

// Looks up `key` in the tensor object `object`; a DataLoss error naming the
// tensor if absent.
absl::StatusOr<const Json*> Field(const Json& object, const char* key,
                                  const std::string& name,
                                  std::string_view source) {
  auto it = object.find(key);
  if (it == object.end()) {
    return DataLoss(source, "tensor '", name, "': missing \"", key, "\"");
  }
  return &*it;
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name,
                                            const Json& value,
                                            int64_t data_size,
                                            std::string_view source) {
  if (!value.is_object()) {
    return DataLoss(source, "tensor '", name, "': entry is a JSON ",
                    value.type_name(), ", not an object");
  }
  SafetensorsEntry entry;
  entry.name = name;

  absl::StatusOr<const Json*> dtype = Field(value, "dtype", name, source);
  if (!dtype.ok()) return dtype.status();
  if (!(*dtype)->is_string()) {
    return DataLoss(source, "tensor '", name, "': \"dtype\" is a JSON ",
                    (*dtype)->type_name(), ", not a string");
  }
  const std::string& dtype_name = (*dtype)->get_ref<const std::string&>();
  std::optional<SafetensorsDtype> parsed_dtype =
      ParseSafetensorsDtype(dtype_name);
  if (!parsed_dtype) {
    return DataLoss(
        source, "tensor '", name, "': unsupported dtype '", dtype_name,
        "' (supported: F32, BF16, F16, F64, I64, I32, I16, I8, U8, BOOL)");
  }
  entry.dtype = *parsed_dtype;

  absl::StatusOr<const Json*> shape = Field(value, "shape", name, source);
  if (!shape.ok()) return shape.status();
  if (!(*shape)->is_array()) {
    return DataLoss(source, "tensor '", name, "': \"shape\" is a JSON ",
                    (*shape)->type_name(), ", not an array");
  }
  entry.shape.reserve((*shape)->size());
  for (const Json& dim : **shape) {
    std::optional<int64_t> size = AsNonNegativeInt64(dim);
    if (!size) {
      return DataLoss(source, "tensor '", name, "': shape dimension ",
                      entry.shape.size(), " is ",
                      dim.is_primitive() ? dim.dump() : dim.type_name(),
                      ", not a non-negative 64-bit integer");
    }
    entry.shape.push_back(*size);
  }

  absl::StatusOr<const Json*> offsets =
      Field(value, "data_offsets", name, source);
  if (!offsets.ok()) return offsets.status();
  std::optional<int64_t> begin, end;
  if ((*offsets)->is_array() && (*offsets)->size() == 2) {
    begin = AsNonNegativeInt64((**offsets)[0]);
    end = AsNonNegativeInt64((**offsets)[1]);
  }
  if (!begin || !end) {
    return DataLoss(source, "tensor '", name,
                    "': \"data_offsets\" must be an array of two non-negative "
                    "64-bit integers");
  }
  if (*begin > *end) {
    return DataLoss(source, "tensor '", name, "': data_offsets [", *begin, ", ",
                    *end, "] end before they begin");
  }
  if (*end > data_size) {
    return DataLoss(source, "tensor '", name, "': data_offsets [", *begin, ", ",
                    *end, "] lie outside the data section of ", data_size,
                    " bytes");
  }
  entry.begin = *begin;
  entry.end = *end;

  std::optional<int64_t> num_bytes = CheckedNumBytes(entry.shape, entry.dtype);
  if (!num_bytes) {
    return DataLoss(source, "tensor '", name, "': shape ",
                    ShapeString(entry.shape), " of ", dtype_name,
                    " overflows a 64-bit byte count");
  }
  if (*num_bytes != entry.NumBytes()) {
    return DataLoss(source, "tensor '", name, "': shape ",
                    ShapeString(entry.shape), " of ", dtype_name, " needs ",
                    *num_bytes, " bytes but data_offsets [", *begin, ", ", *end,
                    "] span ", entry.NumBytes());
  }
  return entry;
}

absl::Status ParseMetadata(const Json& value, std::string_view source,
                           std::map<std::string, std::string>& metadata) {
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) {
    return DataLoss(source, "\"__metadata__\" is a JSON ", value.type_name(),
                    ", not an object");
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return DataLoss(source, "\"__metadata__\" value of '", key,
                      "' is a JSON ", item.type_name(), ", not a string");
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return absl::OkStatus();
}

// Checks that the entries, sorted by offset, tile [0, data_size) exactly.
absl::Status CheckTiling(const std::vector<SafetensorsEntry>& entries,
                         int64_t data_size, std::string_view source) {
  int64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& entry : entries) {
    if (entry.begin < covered) {
      return DataLoss(source, "tensor '", entry.name, "' (bytes [", entry.begin,
                      ", ", entry.end, ")) overlaps tensor '", previous->name,
                      "' (bytes [", previous->begin, ", ", previous->end, "))");
    }
    if (entry.begin > covered) {
      return DataLoss(source, "data bytes [", covered, ", ", entry.begin,
                      ") before tensor '", entry.name,
                      "' belong to no tensor (a gap of ", entry.begin - covered,
                      " bytes)");
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data_size) {
    return DataLoss(source, "data section has ", data_size,
                    " bytes but the tensors cover only ", covered,
                    "; the trailing ", data_size - covered,
                    " bytes belong to no tensor");
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) {
  return Info(dtype).name;
}

std::optional<SafetensorsDtype> ParseSafetensorsDtype(std::string_view name) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

int64_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  return Info(dtype).size;
}

bool IsFloatingSafetensorsDtype(SafetensorsDtype dtype) {
  return dtype == SafetensorsDtype::kF32 || dtype == SafetensorsDtype::kBF16 ||
         dtype == SafetensorsDtype::kF16 || dtype == SafetensorsDtype::kF64;
}

int64_t SafetensorsEntry::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

bool SafetensorsEntry::operator==(const SafetensorsEntry& other) const {
  return name == other.name && dtype == other.dtype && shape == other.shape &&
         begin == other.begin && end == other.end;
}

const SafetensorsEntry* SafetensorsHeader::Find(std::string_view name) const {
  for (const SafetensorsEntry& entry : entries) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    std::string_view file_bytes, std::string_view source) {
  if (file_bytes.size() < 8) {
    return DataLoss(source, "file is ", file_bytes.size(),
                    " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) {
    header_length =
        (header_length << 8) | static_cast<unsigned char>(file_bytes[i]);
  }
  if (header_length > kMaxSafetensorsHeaderBytes) {
    return DataLoss(source, "header length ", header_length,
                    " exceeds the limit of ", kMaxSafetensorsHeaderBytes,
                    " bytes");
  }
  if (header_length > file_bytes.size() - 8) {
    return DataLoss(source, "header length ", header_length,
                    " extends beyond the end of the file (", file_bytes.size(),
                    " bytes)");
  }

  // Tensor names are the keys of the top-level object (depth 1); nlohmann
  // silently keeps the last of duplicate keys, so duplicates are caught while
  // parsing.
  std::set<std::string> keys;
  std::optional<std::string> duplicate;
  Json::parser_callback_t on_event = [&](int depth, Json::parse_event_t event,
                                         Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && !duplicate &&
        !keys.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  const std::string_view header_text = file_bytes.substr(8, header_length);
  const Json header_json = Json::parse(header_text.begin(), header_text.end(),
                                       on_event, /*allow_exceptions=*/false);
  if (header_json.is_discarded()) {
    return DataLoss(source, "header (", header_length,
                    " bytes) is not valid UTF-8 JSON");
  }
  if (!header_json.is_object()) {
    return DataLoss(source, "header is a JSON ", header_json.type_name(),
                    ", not an object");
  }
  if (duplicate)
    return DataLoss(source, "key '", *duplicate,
                    "' appears twice in the header");

  SafetensorsHeader header;
  header.data_offset = 8 + static_cast<int64_t>(header_length);
  header.data_size =
      static_cast<int64_t>(file_bytes.size()) - header.data_offset;
  for (const auto& [key, value] : header_json.items()) {
    if (key == kMetadataKey) {
      if (absl::Status status = ParseMetadata(value, source, header.metadata);
          !status.ok()) {
        return status;
      }
      continue;
    }
    absl::StatusOr<SafetensorsEntry> entry =
        ParseEntry(key, value, header.data_size, source);
    if (!entry.ok()) return entry.status();
    header.entries.push_back(*std::move(entry));
  }
  std::sort(header.entries.begin(), header.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return std::tie(a.begin, a.end, a.name) <
                     std::tie(b.begin, b.end, b.name);
            });
  if (absl::Status status =
          CheckTiling(header.entries, header.data_size, source);
      !status.ok()) {
    return status;
  }
  return header;
}

absl::StatusOr<std::string> EncodeSafetensorsHeader(
    const std::vector<SafetensorsEntry>& entries,
    const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json& metadata_json = header[std::string(kMetadataKey)];
    metadata_json = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) metadata_json[key] = value;
  }
  std::set<std::string_view> names;
  for (const SafetensorsEntry& entry : entries) {
    if (entry.name == kMetadataKey) {
      return absl::InvalidArgumentError(
          "\"__metadata__\" is reserved and cannot name a tensor");
    }
    if (!names.insert(entry.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", entry.name, "' appears twice"));
    }
    std::optional<int64_t> num_bytes =
        CheckedNumBytes(entry.shape, entry.dtype);
    if (!num_bytes || *num_bytes != entry.NumBytes() || entry.begin < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", entry.name, "': shape ", ShapeString(entry.shape), " of ",
          AbslView(SafetensorsDtypeName(entry.dtype)),
          " does not match bytes [", entry.begin, ", ", entry.end, ")"));
    }
    nlohmann::ordered_json& tensor = header[entry.name];
    tensor["dtype"] = std::string(SafetensorsDtypeName(entry.dtype));
    tensor["shape"] = entry.shape;
    tensor["data_offsets"] = {entry.begin, entry.end};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    // dump() throws only for strings that are not valid UTF-8.
    return absl::InvalidArgumentError(absl::StrCat(
        "a tensor name or metadata string is not valid UTF-8: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string encoded(8, '\0');
  for (int i = 0; i < 8; ++i)
    encoded[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return encoded + text;
}

}  // namespace lockstep
