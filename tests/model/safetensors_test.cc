// Tests of the LibTorch safetensors layer: bit-exact round trips, dtype
// conversion, sharded folders, and errors for every kind of malformed file.
#include "model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A safetensors file: 8-byte little-endian length, `json`, `data_size` bytes.
std::string MakeFile(const std::string& json, size_t data_size) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) {
    file[i] = static_cast<char>((uint64_t{json.size()} >> (8 * i)) & 0xff);
  }
  return file + json + std::string(data_size, '\0');
}

std::string TensorBytes(const torch::Tensor& tensor) {
  const torch::Tensor contiguous = tensor.contiguous();
  return std::string(static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes());
}

// True iff `a` and `b` have the same dtype, shape and bytes (NaN payloads and
// signed zeros included).
void ExpectBitIdentical(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.scalar_type(), b.scalar_type());
  EXPECT_EQ(a.sizes(), b.sizes());
  EXPECT_EQ(TensorBytes(a), TensorBytes(b));
}

// Every dtype, with awkward values: NaN, -0, infinities, extremes.
TensorMap AllDtypeTensors() {
  TensorMap tensors;
  tensors["f32"] =
      torch::tensor({0.0f, -0.0f, 1.5f, -3.25e-38f, std::numeric_limits<float>::infinity(),
                     std::numeric_limits<float>::quiet_NaN()})
          .reshape({2, 3});
  tensors["bf16"] = torch::randn({3, 5}).to(torch::kBFloat16);
  tensors["f16"] = torch::tensor({65504.0f, -0.0f, 6.1e-5f, 1.0f / 3}).to(torch::kHalf);
  tensors["f64"] = torch::tensor({1.0 / 3, -1e300}, torch::kDouble);
  tensors["i64"] = torch::tensor({std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                                  std::numeric_limits<int64_t>::max()});
  tensors["i32"] = torch::arange(-3, 3, torch::kInt);
  tensors["i16"] = torch::arange(-2, 5, torch::kShort);
  tensors["i8"] = torch::arange(-128, 127, 50, torch::kChar);
  tensors["u8"] = torch::arange(0, 255, 17, torch::kByte);
  tensors["mask"] = torch::tensor({true, false, true});
  tensors["scalar"] = torch::tensor(2.5f);
  tensors["empty"] = torch::zeros({0, 4});
  return tensors;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("safetensors_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `bytes` to `name` in the test folder and reads it back.
  absl::StatusOr<TensorMap> ReadBytes(const std::string& name, const std::string& bytes) {
    WriteFile(dir_ / name, bytes);
    return ReadSafetensorsFile(dir_ / name);
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripIsBitExactForEveryDtype) {
  const TensorMap tensors = AllDtypeTensors();
  const fs::path path = dir_ / "all.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors, {{"step", "7"}}).ok());
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));

  absl::StatusOr<TensorMap> read = ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_EQ(read->count(name), 1u);
    ExpectBitIdentical(read->at(name), tensor);
  }
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(ReadFile(path), path.string());
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("step"), "7");
}

TEST_F(SafetensorsTest, WriterAlignsDataAndOrdersByDtypeThenName) {
  TensorMap tensors;
  tensors["a"] = torch::ones({3}, torch::kByte);
  tensors["b"] = torch::ones({2}, torch::kFloat);
  tensors["c"] = torch::ones({1}, torch::kLong);
  tensors["d"] = torch::ones({3}, torch::kBFloat16);
  tensors["e"] = torch::ones({1}, torch::kFloat);
  const fs::path path = dir_ / "layout.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors).ok());
  const std::string bytes = ReadFile(path);
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(bytes, path.string());
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->data_offset % 8, 0);
  std::vector<std::string> order;
  for (const SafetensorsEntry& entry : header->entries) {
    order.push_back(entry.name);
    EXPECT_EQ(entry.begin % SafetensorsDtypeSize(entry.dtype), 0) << entry.name;
  }
  EXPECT_THAT(order, ::testing::ElementsAre("c", "b", "e", "d", "a"));
  // The JSON lists tensors in data order, without spaces, padded with spaces.
  EXPECT_EQ(bytes.substr(8, 12), R"({"c":{"dtype)");
}

TEST_F(SafetensorsTest, WriterCopiesNonContiguousTensors) {
  const torch::Tensor base = torch::arange(12, torch::kFloat).reshape({3, 4});
  const fs::path path = dir_ / "t.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, {{"t", base.t()}}).ok());
  absl::StatusOr<TensorMap> read = ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(torch::equal(read->at("t"), base.t()));
}

TEST_F(SafetensorsTest, ConvertsHalfPrecisionFloatsToFloat32Exactly) {
  TensorMap tensors;
  // Values exactly representable in both 16-bit formats.
  const torch::Tensor values = torch::tensor({1.5f, -2.25f, 0.0f, 1024.0f});
  tensors["bf16"] = values.to(torch::kBFloat16);
  tensors["f16"] = torch::tensor({65504.0f, -0.5f}).to(torch::kHalf);
  tensors["ids"] = torch::tensor({int64_t{1} << 40, int64_t{-3}});
  tensors["mask"] = torch::tensor({false, true});
  const fs::path path = dir_ / "half.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors).ok());

  absl::StatusOr<TensorMap> read = ReadSafetensorsFile(path, torch::kFloat);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->at("bf16").scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(read->at("bf16"), values));
  EXPECT_TRUE(torch::equal(read->at("f16"), torch::tensor({65504.0f, -0.5f})));
  // Integer and bool tensors keep their dtype and values.
  ExpectBitIdentical(read->at("ids"), tensors["ids"]);
  ExpectBitIdentical(read->at("mask"), tensors["mask"]);

  read = ReadSafetensorsFile(path, torch::kBFloat16);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->at("f16").scalar_type(), torch::kBFloat16);
}

TEST_F(SafetensorsTest, RejectsNonFloatingConversionTarget) {
  ASSERT_TRUE(WriteSafetensorsFile(dir_ / "x.safetensors", {{"x", torch::ones({2})}}).ok());
  absl::StatusOr<TensorMap> read = ReadSafetensorsFile(dir_ / "x.safetensors", torch::kLong);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("convert_floats_to"));
}

TEST_F(SafetensorsTest, ReadsBoolBytesOtherThanOneAsTrue) {
  absl::StatusOr<TensorMap> read =
      ReadBytes("bool.safetensors",
                MakeFile(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", 0) +
                    std::string("\x00\x02\xff", 3));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(torch::equal(read->at("m"), torch::tensor({false, true, true})));
}

TEST_F(SafetensorsTest, WriterRejectsUnstorableTensorsAndKeepsOldFile) {
  const fs::path path = dir_ / "keep.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, {{"x", torch::ones({2})}}).ok());
  const std::string before = ReadFile(path);
  const std::vector<std::pair<TensorMap, const char*>> cases = {
      {{{"undefined", torch::Tensor()}}, "tensor 'undefined' is undefined"},
      {{{"complex", torch::ones({2}, torch::kComplexFloat)}}, "has no safetensors equivalent"},
      {{{"__metadata__", torch::ones({1})}}, "reserved"},
  };
  for (const auto& [tensors, expected_message] : cases) {
    absl::Status status = WriteSafetensorsFile(path, tensors);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), AllOf(HasSubstr(path.string()), HasSubstr(expected_message)));
  }
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
}

// --- Malformed files: status code, file name and tensor name. ---

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  absl::StatusOr<TensorMap> read = ReadSafetensorsFile(dir_ / "absent");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr("absent"));
}

TEST_F(SafetensorsTest, ShortFileIsDataLoss) {
  absl::StatusOr<TensorMap> read = ReadBytes("short.safetensors", "\x10\0\0");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), AllOf(HasSubstr("short.safetensors"),
                                             HasSubstr("shorter than the 8-byte header length")));
}

TEST_F(SafetensorsTest, HeaderLengthBeyondFileIsDataLoss) {
  std::string bytes = MakeFile("{}", 0);
  bytes[0] = 100;
  absl::StatusOr<TensorMap> read = ReadBytes("long.safetensors", bytes);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      read.status().message(),
      AllOf(HasSubstr("long.safetensors"), HasSubstr("header length 100 extends beyond the end")));
}

TEST_F(SafetensorsTest, InvalidJsonIsDataLoss) {
  absl::StatusOr<TensorMap> read =
      ReadBytes("json.safetensors", MakeFile(R"({"w": {"dtype": )", 0));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr("json.safetensors"), HasSubstr("not valid")));
}

TEST_F(SafetensorsTest, UnknownDtypeNamesFileAndTensor) {
  absl::StatusOr<TensorMap> read =
      ReadBytes("dtype.safetensors",
                MakeFile(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", 8));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr("dtype.safetensors"), HasSubstr("tensor 'w'"),
                    HasSubstr("unsupported dtype 'C64'")));
}

TEST_F(SafetensorsTest, ShapeTimesDtypeNotMatchingSpanNamesTensor) {
  absl::StatusOr<TensorMap> read =
      ReadBytes("span.safetensors",
                MakeFile(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr("span.safetensors"), HasSubstr("tensor 'w'"),
                    HasSubstr("needs 6 bytes but data_offsets [0, 4] span 4")));
}

TEST_F(SafetensorsTest, OffsetsOutsideDataSectionNameTensor) {
  absl::StatusOr<TensorMap> read =
      ReadBytes("outside.safetensors",
                MakeFile(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr("outside.safetensors"), HasSubstr("tensor 'w'"),
                    HasSubstr("outside the data section of 8 bytes")));
}

TEST_F(SafetensorsTest, OverlappingOffsetsNameBothTensors) {
  absl::StatusOr<TensorMap> read = ReadBytes(
      "overlap.safetensors", MakeFile(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                                      R"("b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})",
                                      12));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr("overlap.safetensors"),
                    HasSubstr("tensor 'b' (bytes [4, 12)) overlaps tensor 'a'")));
}

// --- Folders: single file, shards, index errors. ---

TEST_F(SafetensorsTest, DirFitsInOneFileWhenSmallEnough) {
  const TensorMap tensors = AllDtypeTensors();
  ASSERT_TRUE(WriteSafetensorsDir(dir_, tensors, int64_t{1} << 30).ok());
  EXPECT_TRUE(fs::exists(dir_ / kSafetensorsFileName));
  EXPECT_FALSE(fs::exists(dir_ / kSafetensorsIndexFileName));
  absl::StatusOr<TensorMap> read = LoadSafetensorsDir(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  for (const auto& [name, tensor] : tensors) ExpectBitIdentical(read->at(name), tensor);
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(ReadFile(dir_ / kSafetensorsFileName), "model.safetensors");
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->metadata.at("format"), "pt");
}

TEST_F(SafetensorsTest, ShardedDirRoundTripsWithHuggingFaceIndex) {
  TensorMap tensors;
  for (int i = 0; i < 5; ++i) {
    tensors["layer." + std::to_string(i) + ".weight"] =
        torch::randn({4, 8}).to(i % 2 ? torch::kBFloat16 : torch::kFloat);
  }
  tensors["big"] = torch::randn({64});  // 256 bytes: a shard of its own.
  // 32 f32 = 128 bytes, 32 bf16 = 64 bytes; at most 200 bytes per shard, so
  // shards are {big}, {layer.0, layer.1}, {layer.2, layer.3}, {layer.4}.
  ASSERT_TRUE(WriteSafetensorsDir(dir_, tensors, 200).ok());

  const std::string index_text = ReadFile(dir_ / kSafetensorsIndexFileName);
  EXPECT_THAT(index_text, HasSubstr(R"("total_size": 768)"));
  EXPECT_THAT(index_text, HasSubstr(R"("big": "model-00001-of-00004.safetensors")"));
  EXPECT_THAT(index_text, HasSubstr(R"("layer.4.weight": "model-00004-of-00004.safetensors")"));
  for (int i = 1; i <= 4; ++i) {
    EXPECT_TRUE(fs::exists(dir_ / ("model-0000" + std::to_string(i) + "-of-00004.safetensors")));
  }
  EXPECT_FALSE(fs::exists(dir_ / kSafetensorsFileName));

  absl::StatusOr<TensorMap> read = LoadSafetensorsDir(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), tensors.size());
  for (const auto& [name, tensor] : tensors) ExpectBitIdentical(read->at(name), tensor);

  read = LoadSafetensorsDir(dir_, torch::kFloat);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->at("layer.1.weight").scalar_type(), torch::kFloat);
}

// ReadSafetensorsDirInto: every entry lands in the caller's tensor bit for bit (single file and
// shards, every dtype), floating entries convert, skipped entries stay untouched.
TEST_F(SafetensorsTest, ReadIntoFillsCallerTensorsLikeLoadSafetensorsDir) {
  for (const int64_t shard_bytes : {int64_t{1} << 30, int64_t{40}}) {
    const TensorMap tensors = AllDtypeTensors();
    ASSERT_TRUE(WriteSafetensorsDir(dir_, tensors, shard_bytes).ok());
    TensorMap filled;
    std::vector<std::string> visited;
    absl::Status s = ReadSafetensorsDirInto(
        dir_, [&](const SafetensorsEntry& entry) -> absl::StatusOr<torch::Tensor> {
          visited.push_back(entry.name);
          if (entry.name == "i16") return torch::Tensor();  // skipped
          const torch::Tensor& like = tensors.at(entry.name);
          filled[entry.name] = torch::full(like.sizes(), 7, like.options());
          return filled[entry.name];
        });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(visited.size(), tensors.size()) << "shard bytes " << shard_bytes;
    EXPECT_EQ(filled.count("i16"), 0u);
    for (const auto& [name, tensor] : filled) ExpectBitIdentical(tensor, tensors.at(name));
  }

  // bf16 on disk into a float32 destination: the same values as LoadSafetensorsDir converts to.
  TensorMap half = {{"w", torch::randn({3, 1000}).to(torch::kBFloat16)}};
  ASSERT_TRUE(WriteSafetensorsDir(dir_, half, int64_t{1} << 30).ok());
  torch::Tensor into = torch::empty({3, 1000});
  ASSERT_TRUE(ReadSafetensorsDirInto(dir_, [&](const SafetensorsEntry&) {
                return absl::StatusOr<torch::Tensor>(into);
              }).ok());
  ExpectBitIdentical(into, half.at("w").to(torch::kFloat));
}

// A tensor larger than one 8 MiB copy chunk arrives whole (the chunk boundaries are invisible).
TEST_F(SafetensorsTest, ReadIntoCopiesTensorsLargerThanOneChunk) {
  const torch::Tensor big = torch::randn({3, (int64_t{9} << 20) / 4 + 5});  // ~27 MiB
  ASSERT_TRUE(WriteSafetensorsDir(dir_, {{"big", big}}, int64_t{1} << 30).ok());
  torch::Tensor into = torch::zeros_like(big);
  ASSERT_TRUE(ReadSafetensorsDirInto(dir_, [&](const SafetensorsEntry&) {
                return absl::StatusOr<torch::Tensor>(into);
              }).ok());
  ExpectBitIdentical(into, big);
}

TEST_F(SafetensorsTest, ReadIntoRejectsUnusableDestinationsAndPassesCallerErrors) {
  ASSERT_TRUE(WriteSafetensorsDir(dir_, {{"ids", torch::arange(6)}, {"w", torch::ones({2, 3})}},
                                  int64_t{1} << 30)
                  .ok());
  auto read_with = [&](std::function<torch::Tensor(const SafetensorsEntry&)> make) {
    return ReadSafetensorsDirInto(dir_, [&](const SafetensorsEntry& entry) {
      return absl::StatusOr<torch::Tensor>(make(entry));
    });
  };
  // An integer entry is never converted.
  absl::Status s = read_with([](const SafetensorsEntry& e) {
    return e.name == "ids" ? torch::zeros({6}) : torch::Tensor();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("tensor 'ids'"), HasSubstr("I64")));
  // The element count must match; a non-contiguous destination is refused.
  s = read_with([](const SafetensorsEntry& e) {
    return e.name == "w" ? torch::zeros({7}) : torch::Tensor();
  });
  EXPECT_THAT(s.message(), AllOf(HasSubstr("tensor 'w'"), HasSubstr("6 elements")));
  s = read_with([](const SafetensorsEntry& e) {
    return e.name == "w" ? torch::zeros({3, 2}).t() : torch::Tensor();
  });
  EXPECT_THAT(s.message(), HasSubstr("not a contiguous CPU tensor"));
  // The caller's own error ends the read unchanged.
  s = ReadSafetensorsDirInto(dir_, [](const SafetensorsEntry& e) -> absl::StatusOr<torch::Tensor> {
    return absl::FailedPreconditionError("no room for " + e.name);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("no room for"));
  // A folder without a checkpoint is NotFound, as for LoadSafetensorsDir.
  s = ReadSafetensorsDirInto(dir_ / "nothing", [](const SafetensorsEntry&) {
    return absl::StatusOr<torch::Tensor>(torch::Tensor());
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
}

TEST_F(SafetensorsTest, RewritingDirRemovesStaleCheckpointFiles) {
  TensorMap old_tensors = {{"a", torch::ones({64})}, {"b", torch::ones({64})}};
  ASSERT_TRUE(WriteSafetensorsDir(dir_, old_tensors, 256).ok());
  ASSERT_TRUE(fs::exists(dir_ / kSafetensorsIndexFileName));
  WriteFile(dir_ / "notes.txt", "keep me");

  TensorMap new_tensors = {{"c", torch::zeros({2})}};
  ASSERT_TRUE(WriteSafetensorsDir(dir_, new_tensors, 256).ok());
  EXPECT_FALSE(fs::exists(dir_ / kSafetensorsIndexFileName));
  EXPECT_FALSE(fs::exists(dir_ / "model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  absl::StatusOr<TensorMap> read = LoadSafetensorsDir(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 1u);
  EXPECT_EQ(read->count("c"), 1u);

  // And back to shards: the single file must go, or it would shadow them.
  ASSERT_TRUE(WriteSafetensorsDir(dir_, old_tensors, 256).ok());
  EXPECT_FALSE(fs::exists(dir_ / kSafetensorsFileName));
  read = LoadSafetensorsDir(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->count("a"), 1u);
}

TEST_F(SafetensorsTest, WriteDirRejectsNonPositiveShardSize) {
  absl::Status status = WriteSafetensorsDir(dir_, {{"a", torch::ones({1})}}, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("max_shard_bytes"));
}

// Writes shard files s1 = {a}, s2 = {b} and an index with `weight_map`.
class SafetensorsIndexTest : public SafetensorsTest {
 protected:
  void WriteShardsAndIndex(const std::string& weight_map) {
    ASSERT_TRUE(WriteSafetensorsFile(dir_ / "s1.safetensors", {{"a", torch::ones({2})}}).ok());
    ASSERT_TRUE(WriteSafetensorsFile(dir_ / "s2.safetensors", {{"b", torch::ones({3})}}).ok());
    WriteFile(dir_ / kSafetensorsIndexFileName,
              R"({"metadata": {"total_size": 20}, "weight_map": )" + weight_map + "}");
  }

  void ExpectLoadError(absl::StatusCode code, const std::vector<std::string>& substrings) {
    absl::StatusOr<TensorMap> read = LoadSafetensorsDir(dir_);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), code) << read.status();
    for (const std::string& substring : substrings) {
      EXPECT_THAT(read.status().message(), HasSubstr(substring));
    }
  }
};

TEST_F(SafetensorsIndexTest, LoadsShardsListedByIndex) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  absl::StatusOr<TensorMap> read = LoadSafetensorsDir(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 2u);
}

TEST_F(SafetensorsIndexTest, MissingIndexAndModelFileIsNotFound) {
  ExpectLoadError(absl::StatusCode::kNotFound, {dir_.string(), "model.safetensors.index.json"});
}

TEST_F(SafetensorsIndexTest, MissingShardFileIsNotFound) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors", "b": "s3.safetensors"})");
  ExpectLoadError(absl::StatusCode::kNotFound,
                  {"s3.safetensors", "shard listed in", "does not exist"});
}

TEST_F(SafetensorsIndexTest, TensorListedButMissingFromShardIsDataLoss) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors", "c": "s2.safetensors"})");
  ExpectLoadError(absl::StatusCode::kDataLoss,
                  {"s2.safetensors", "tensor 'c' listed in", "missing"});
}

TEST_F(SafetensorsIndexTest, UnexpectedTensorInShardIsDataLoss) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors"})");
  ASSERT_TRUE(WriteSafetensorsFile(dir_ / "s1.safetensors",
                                   {{"a", torch::ones({2})}, {"extra", torch::ones({1})}})
                  .ok());
  ExpectLoadError(absl::StatusCode::kDataLoss,
                  {"s1.safetensors", "tensor 'extra'", "not listed in the weight_map"});
}

TEST_F(SafetensorsIndexTest, TensorMappedToAnotherShardIsDataLoss) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors", "c": "s1.safetensors"})");
  ASSERT_TRUE(WriteSafetensorsFile(dir_ / "s2.safetensors",
                                   {{"b", torch::ones({3})}, {"c", torch::ones({1})}})
                  .ok());
  ExpectLoadError(absl::StatusCode::kDataLoss,
                  {"s2.safetensors", "tensor 'c'", "is mapped to shard 's1.safetensors'"});
}

TEST_F(SafetensorsIndexTest, DuplicateTensorAcrossShardsIsDataLoss) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  ASSERT_TRUE(WriteSafetensorsFile(dir_ / "s2.safetensors",
                                   {{"a", torch::ones({2})}, {"b", torch::ones({3})}})
                  .ok());
  ExpectLoadError(absl::StatusCode::kDataLoss, {"s2.safetensors",
                                                "tensor 'a' also appears in shard "
                                                "'s1.safetensors'"});
}

TEST_F(SafetensorsIndexTest, MalformedIndexIsDataLoss) {
  WriteShardsAndIndex(R"(["not", "an", "object"])");
  ExpectLoadError(absl::StatusCode::kDataLoss, {"model.safetensors.index.json", "weight_map"});
  WriteShardsAndIndex(R"({"a": "../s1.safetensors"})");
  ExpectLoadError(absl::StatusCode::kDataLoss, {"tensor 'a'", "is not a shard file name"});
  WriteFile(dir_ / kSafetensorsIndexFileName, "{ not json");
  ExpectLoadError(absl::StatusCode::kDataLoss, {"not a JSON object"});
}

TEST_F(SafetensorsIndexTest, MalformedShardReportsShardFile) {
  WriteShardsAndIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  WriteFile(dir_ / "s2.safetensors", "short");
  ExpectLoadError(absl::StatusCode::kDataLoss, {"s2.safetensors", "shorter than the 8-byte"});
}

}  // namespace
}  // namespace lockstep
