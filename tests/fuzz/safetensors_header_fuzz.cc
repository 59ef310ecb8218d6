// libFuzzer target for the safetensors header parser (built and run by
// scripts/fuzz_safetensors.sh). Any input must yield a value or an error,
// never a crash, a sanitizer report or a read outside the input. Accepted
// inputs must also satisfy the parser's contract, checked here:
//   - every entry lies inside the data section, and the entries tile it;
//   - re-encoding the header and appending the same data section parses back
//     to the same entries and metadata (encode ∘ parse is the identity).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "model/safetensors_header.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::SafetensorsHeader> header =
      lockstep::ParseSafetensorsHeader(bytes, "fuzz.safetensors");
  if (!header.ok()) {
    Check(header.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }

  Check(header->data_offset >= 8);
  Check(header->data_offset + header->data_size == static_cast<int64_t>(size));
  int64_t covered = 0;
  for (const lockstep::SafetensorsEntry& entry : header->entries) {
    Check(entry.begin == covered && entry.end >= entry.begin);
    Check(entry.NumElements() * lockstep::SafetensorsDtypeSize(entry.dtype) ==
          entry.NumBytes());
    covered = entry.end;
  }
  Check(covered == header->data_size);

  absl::StatusOr<std::string> encoded =
      lockstep::EncodeSafetensorsHeader(header->entries, header->metadata);
  Check(encoded.ok() && encoded->size() % 8 == 0);
  const std::string rewritten =
      *encoded + std::string(bytes.substr(header->data_offset));
  absl::StatusOr<lockstep::SafetensorsHeader> reparsed =
      lockstep::ParseSafetensorsHeader(rewritten, "fuzz.safetensors");
  Check(reparsed.ok());
  Check(reparsed->entries == header->entries);
  Check(reparsed->metadata == header->metadata);
  Check(reparsed->data_size == header->data_size);
  return 0;
}
