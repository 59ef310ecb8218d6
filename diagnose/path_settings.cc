#include "diagnose/path_settings.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep::diagnose {
namespace {

absl::StatusOr<int64_t> PositiveInt(absl::string_view key, absl::string_view value,
                                    int64_t minimum) {
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < minimum) {
    return absl::InvalidArgumentError(absl::StrCat("path setting '", key, "': '", value,
                                                   "' is not an integer >= ", minimum));
  }
  return parsed;
}

const char* DtypeName(torch::Dtype dtype) {
  return dtype == torch::kBFloat16 ? "bfloat16" : "float32";
}

}  // namespace

const char* PathKindName(PathKind kind) {
  return kind == PathKind::kTrain ? "train" : "generate";
}

std::string PathSettings::ToString() const {
  std::string text = absl::StrCat("path=", PathKindName(path), ",mode=", NumericModeName(mode),
                                  ",threads=", threads, ",dtype=", DtypeName(dtype));
  if (path == PathKind::kTrain) {
    absl::StrAppend(&text, ",pack=", pack);
  } else {
    absl::StrAppend(&text, ",chunk=", chunk, ",batch=", batch);
  }
  return text;
}

absl::StatusOr<PathSettings> ParsePathSettings(const std::string& text, const PathSettings& base) {
  PathSettings settings = base;
  std::vector<std::string> keys;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("path setting '", item, "' is not key=value"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(kv[0]);
    const absl::string_view value = absl::StripAsciiWhitespace(kv[1]);
    keys.emplace_back(key);
    if (key == "path") {
      if (value == "train") {
        settings.path = PathKind::kTrain;
      } else if (value == "generate") {
        settings.path = PathKind::kGenerate;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("path setting 'path': '", value, "' is not train or generate"));
      }
    } else if (key == "mode") {
      absl::StatusOr<NumericMode> mode = ParseNumericMode(value);
      if (!mode.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("path setting 'mode': '", value,
                                                       "' is not fast or batch_invariant"));
      }
      settings.mode = *mode;
    } else if (key == "threads") {
      absl::StatusOr<int64_t> threads = PositiveInt(key, value, 0);
      if (!threads.ok()) return threads.status();
      settings.threads = static_cast<int>(*threads);
    } else if (key == "dtype") {
      if (value == "float32") {
        settings.dtype = torch::kFloat32;
      } else if (value == "bfloat16") {
        settings.dtype = torch::kBFloat16;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("path setting 'dtype': '", value, "' is not float32 or bfloat16"));
      }
    } else if (key == "pack" || key == "chunk" || key == "batch") {
      absl::StatusOr<int64_t> n = PositiveInt(key, value, 1);
      if (!n.ok()) return n.status();
      (key == "pack" ? settings.pack : key == "chunk" ? settings.chunk : settings.batch) = *n;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown path setting '", key,
          "' (known: path, mode, threads, dtype, pack, chunk, batch)"));
    }
  }
  for (const std::string& key : keys) {
    if (key == "pack" && settings.path != PathKind::kTrain) {
      return absl::InvalidArgumentError("path setting 'pack' applies to path=train only");
    }
    if ((key == "chunk" || key == "batch") && settings.path != PathKind::kGenerate) {
      return absl::InvalidArgumentError(
          absl::StrCat("path setting '", key, "' applies to path=generate only"));
    }
  }
  if (settings.mode == NumericMode::kBatchInvariant && settings.dtype != torch::kFloat32) {
    return absl::InvalidArgumentError(
        "path settings: mode=batch_invariant needs dtype=float32 (the kernels are fp32)");
  }
  return settings;
}

}  // namespace lockstep::diagnose
