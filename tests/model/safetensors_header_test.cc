// Tests of the LibTorch-free safetensors header parser and encoder, on bytes
// held in memory.
#include "model/safetensors_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// The 8-byte little-endian length followed by `json` and `data_size` bytes.
std::string MakeFile(const std::string& json, size_t data_size) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) {
    file[i] = static_cast<char>((uint64_t{json.size()} >> (8 * i)) & 0xff);
  }
  return file + json + std::string(data_size, '\x01');
}

// The exact bytes of the reference implementation's `test_serialization`.
std::string ReferenceSerializedHeader() {
  const std::string json =
      R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  EXPECT_EQ(json.size(), 64u);
  return MakeFile(json, 0);
}

TEST(SafetensorsHeaderTest, ParsesReferenceSerializerOutput) {
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(ReferenceSerializedHeader() + std::string(24, 0),
                             "reference.safetensors");
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->entries.size(), 1u);
  const SafetensorsEntry& entry = header->entries[0];
  EXPECT_EQ(entry.name, "attn.0");
  EXPECT_EQ(entry.dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(entry.shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(entry.begin, 0);
  EXPECT_EQ(entry.end, 24);
  EXPECT_EQ(entry.NumElements(), 6);
  EXPECT_EQ(header->data_offset, 72);
  EXPECT_EQ(header->data_size, 24);
  EXPECT_TRUE(header->metadata.empty());
}

TEST(SafetensorsHeaderTest, EncodeMatchesReferenceSerializerBytes) {
  absl::StatusOr<std::string> encoded = EncodeSafetensorsHeader(
      {{"attn.0", SafetensorsDtype::kF32, {1, 2, 3}, 0, 24}}, {});
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(*encoded, ReferenceSerializedHeader());

  // The reference's `test_empty`: "{}" padded to 8 bytes, with and without
  // metadata.
  encoded = EncodeSafetensorsHeader({}, {});
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ(*encoded, MakeFile("{}      ", 0));
  encoded = EncodeSafetensorsHeader({}, {{"framework", "pt"}});
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ(*encoded,
            MakeFile(R"({"__metadata__":{"framework":"pt"}}     )", 0));
}

TEST(SafetensorsHeaderTest, EncodedHeaderParsesBackToSameEntries) {
  const std::vector<SafetensorsEntry> entries = {
      {"w", SafetensorsDtype::kI64, {2}, 0, 16},
      {"x.weight", SafetensorsDtype::kBF16, {3, 1}, 16, 22},
      {"scalar", SafetensorsDtype::kF16, {}, 22, 24},
      {"empty", SafetensorsDtype::kU8, {0, 5}, 24, 24},
      {"mask", SafetensorsDtype::kBool, {3}, 24, 27},
  };
  absl::StatusOr<std::string> encoded =
      EncodeSafetensorsHeader(entries, {{"format", "pt"}});
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(encoded->size() % 8, 0u);
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(*encoded + std::string(27, 0), "x");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  ASSERT_EQ(header->entries.size(), entries.size());
  for (const SafetensorsEntry& entry : entries) {
    const SafetensorsEntry* parsed = header->Find(entry.name);
    ASSERT_NE(parsed, nullptr) << entry.name;
    EXPECT_EQ(*parsed, entry);
  }
  // Returned in data order; the zero-size entry sorts before "mask" (same
  // begin, smaller end).
  EXPECT_EQ(header->entries[3].name, "empty");
  EXPECT_EQ(header->entries[4].name, "mask");
}

TEST(SafetensorsHeaderTest, AcceptsNullMetadataAndUnpaddedOrPaddedJson) {
  const std::string body =
      R"("a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]})";
  for (const std::string& json : {"{" + body + "}", "{" + body + "}   ",
                                  R"({"__metadata__":null,)" + body + "}"}) {
    absl::StatusOr<SafetensorsHeader> header =
        ParseSafetensorsHeader(MakeFile(json, 8), "ok.safetensors");
    EXPECT_TRUE(header.ok()) << json << ": " << header.status();
  }
}

struct BadHeaderCase {
  const char* what;
  std::string file;
  const char* expected_message;
};

TEST(SafetensorsHeaderTest, RejectsEveryMalformedHeaderWithDataLoss) {
  const auto tensor = [](const std::string& fields) {
    return R"({"t":{)" + fields + "}}";
  };
  const std::vector<BadHeaderCase> cases = {
      {"empty file", "", "shorter than the 8-byte header length"},
      {"7 bytes", std::string(7, '\0'), "file is 7 bytes"},
      {"length beyond file", MakeFile("{}", 0).substr(0, 9),
       "extends beyond the end of the file"},
      {"length above limit", std::string(7, '\xff') + '\x7f',
       "exceeds the limit"},
      {"invalid JSON", MakeFile("{\"t\": [", 0), "not valid UTF-8 JSON"},
      {"invalid UTF-8", MakeFile("{\"\xff\":1}", 0), "not valid UTF-8 JSON"},
      {"JSON array", MakeFile("[1, 2]", 0), "header is a JSON array"},
      {"duplicate name",
       MakeFile(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                R"("t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                2),
       "key 't' appears twice"},
      {"entry not object", MakeFile(R"({"t": 3})", 0),
       "tensor 't': entry is a JSON number"},
      {"metadata not object", MakeFile(R"({"__metadata__": [1]})", 0),
       "\"__metadata__\" is a JSON array"},
      {"metadata value not string",
       MakeFile(R"({"__metadata__": {"k": 1}})", 0),
       "value of 'k' is a JSON number"},
      {"missing dtype",
       MakeFile(tensor(R"("shape":[1],"data_offsets":[0,4])"), 4),
       "tensor 't': missing \"dtype\""},
      {"dtype not string",
       MakeFile(tensor(R"("dtype":4,"shape":[1],"data_offsets":[0,4])"), 4),
       "\"dtype\" is a JSON number"},
      {"unknown dtype",
       MakeFile(tensor(R"("dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1])"),
                1),
       "tensor 't': unsupported dtype 'F8_E4M3'"},
      {"missing shape",
       MakeFile(tensor(R"("dtype":"F32","data_offsets":[0,4])"), 4),
       "tensor 't': missing \"shape\""},
      {"shape not array",
       MakeFile(tensor(R"("dtype":"F32","shape":4,"data_offsets":[0,4])"), 4),
       "\"shape\" is a JSON number"},
      {"negative dimension",
       MakeFile(tensor(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"),
                4),
       "shape dimension 0 is -1"},
      {"fractional dimension",
       MakeFile(tensor(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"),
                4),
       "shape dimension 0 is 1.5"},
      {"dimension beyond uint64",
       MakeFile(tensor(R"("dtype":"U8","shape":[18446744073709551616],)"
                       R"("data_offsets":[0,1])"),
                1),
       "not a non-negative 64-bit integer"},
      {"overflowing shape",
       MakeFile(tensor(R"("dtype":"F64","shape":[4294967296,4294967296],)"
                       R"("data_offsets":[0,8])"),
                8),
       "overflows a 64-bit byte count"},
      {"missing data_offsets",
       MakeFile(tensor(R"("dtype":"F32","shape":[1])"), 4),
       "tensor 't': missing \"data_offsets\""},
      {"three data_offsets",
       MakeFile(tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4,4])"),
                4),
       "must be an array of two"},
      {"negative offset",
       MakeFile(tensor(R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])"),
                4),
       "must be an array of two"},
      {"end before begin",
       MakeFile(tensor(R"("dtype":"U8","shape":[0],"data_offsets":[4,0])"), 4),
       "end before they begin"},
      {"offsets outside data",
       MakeFile(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), 4),
       "tensor 't': data_offsets [0, 8] lie outside the data section of 4"},
      {"shape times dtype differs from span",
       MakeFile(tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,20])"),
                20),
       "tensor 't': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, "
       "20] span 20"},
      {"overlap",
       MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12),
       "tensor 'b' (bytes [4, 12)) overlaps tensor 'a' (bytes [0, 8))"},
      {"gap",
       MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                12),
       "data bytes [4, 8) before tensor 'b' belong to no tensor"},
      {"trailing bytes",
       MakeFile(tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])"), 6),
       "the trailing 2 bytes belong to no tensor"},
  };
  for (const BadHeaderCase& bad : cases) {
    SCOPED_TRACE(bad.what);
    absl::StatusOr<SafetensorsHeader> header =
        ParseSafetensorsHeader(bad.file, "bad.safetensors");
    ASSERT_FALSE(header.ok());
    EXPECT_EQ(header.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(header.status().message(), HasSubstr("bad.safetensors: "));
    EXPECT_THAT(header.status().message(), HasSubstr(bad.expected_message));
  }
}

TEST(SafetensorsHeaderTest, EncodeRejectsUnusableEntriesWithInvalidArgument) {
  const SafetensorsEntry good{"a", SafetensorsDtype::kU8, {1}, 0, 1};
  SafetensorsEntry reserved = good;
  reserved.name = "__metadata__";
  SafetensorsEntry not_utf8 = good;
  not_utf8.name = "\xff";
  SafetensorsEntry wrong_span = good;
  wrong_span.end = 2;
  const std::vector<std::pair<std::vector<SafetensorsEntry>, const char*>>
      cases = {{{reserved}, "reserved"},
               {{good, good}, "tensor 'a' appears twice"},
               {{not_utf8}, "not valid UTF-8"},
               {{wrong_span}, "does not match bytes [0, 2)"}};
  for (const auto& [entries, expected_message] : cases) {
    absl::StatusOr<std::string> encoded = EncodeSafetensorsHeader(entries, {});
    ASSERT_FALSE(encoded.ok()) << expected_message;
    EXPECT_EQ(encoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(encoded.status().message(), HasSubstr(expected_message));
  }
}

TEST(SafetensorsHeaderTest, DtypeNamesAndSizesRoundTrip) {
  for (SafetensorsDtype dtype :
       {SafetensorsDtype::kF32, SafetensorsDtype::kBF16, SafetensorsDtype::kF16,
        SafetensorsDtype::kF64, SafetensorsDtype::kI64, SafetensorsDtype::kI32,
        SafetensorsDtype::kI16, SafetensorsDtype::kI8, SafetensorsDtype::kU8,
        SafetensorsDtype::kBool}) {
    EXPECT_EQ(ParseSafetensorsDtype(SafetensorsDtypeName(dtype)), dtype);
  }
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kBF16), 2);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kI64), 8);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kBool), 1);
  EXPECT_FALSE(ParseSafetensorsDtype("f32").has_value());
  EXPECT_TRUE(IsFloatingSafetensorsDtype(SafetensorsDtype::kBF16));
  EXPECT_FALSE(IsFloatingSafetensorsDtype(SafetensorsDtype::kI64));
}

}  // namespace
}  // namespace lockstep
