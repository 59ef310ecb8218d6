#include "model/tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& config) {
  Normalizer normalizer;
  if (config.is_null()) return normalizer;
  const std::string type = config.value("type", "");
  if (type == "NFC") {
    normalizer.nfc_ = true;
    return normalizer;
  }
  if (type == "Sequence") {
    for (const nlohmann::json& step : config.value("normalizers", nlohmann::json::array())) {
      if (step.value("type", "") != "NFC") {
        return absl::UnimplementedError(
            absl::StrCat("normalizer '", step.value("type", ""), "' is not supported"));
      }
      normalizer.nfc_ = true;
    }
    return normalizer;
  }
  return absl::UnimplementedError(absl::StrCat("normalizer '", type, "' is not supported"));
}

absl::StatusOr<std::string_view> Normalizer::Normalize(std::string_view text,
                                                       std::string* storage) const {
  if (!nfc_) return text;
  // Every code point below U+0300 is NFC-stable and none of them combines with a neighbour, so
  // text without a lead byte >= 0xCC is already NFC: the common case skips ICU entirely.
  bool maybe_changes = false;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) {
      maybe_changes = true;
      break;
    }
  }
  if (!maybe_changes) return text;
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(error);
  if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU NFC: ", u_errorName(error)));
  icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (nfc->isNormalizedUTF8(piece, error) && U_SUCCESS(error)) return text;
  error = U_ZERO_ERROR;
  storage->clear();
  icu::StringByteSink<std::string> sink(storage);
  nfc->normalizeUTF8(0, piece, sink, nullptr, error);
  if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU NFC: ", u_errorName(error)));
  return std::string_view(*storage);
}

}  // namespace lockstep
