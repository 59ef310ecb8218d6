// Interoperability with Python (Debian's python3 + torch, no safetensors
// package): a 20-line reader written from the format description reads our
// files, and a writer that lays files out like Hugging Face tooling produces
// files we read. Skipped when /usr/bin/python3 cannot import torch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "model/safetensors.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr char kPython[] = "/usr/bin/python3";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void ExpectBitIdentical(const torch::Tensor& a, const torch::Tensor& b) {
  ASSERT_EQ(a.scalar_type(), b.scalar_type());
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_EQ(std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                        a.nbytes()),
            0);
}

// A reader written straight from the format description.
constexpr char kPythonReader[] = R"(import json, struct, sys, torch
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
          "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
          "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}

def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert (8 + n) % 8 == 0, "data section is not 8-byte aligned"
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw, dtype = bytearray(data[8 + n + begin:8 + n + end]), DTYPES[info["dtype"]]
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return header.get("__metadata__"), tensors
)";

constexpr char kPythonCheckOurFile[] = R"(
metadata, tensors = load(sys.argv[1])
assert metadata == {"format": "pt"}, metadata
expected = {
    "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
    "bf16": (torch.arange(4, dtype=torch.float32) * 1.5).to(torch.bfloat16),
    "f16": torch.tensor([65504.0, -0.5], dtype=torch.float16),
    "i64": torch.tensor([-(2 ** 63), 2 ** 40, 7]),
    "mask": torch.tensor([True, False, True]),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 3),
}
assert sorted(tensors) == sorted(expected), sorted(tensors)
for name, want in expected.items():
    got = tensors[name]
    assert got.dtype == want.dtype and torch.equal(got, want), (name, got, want)
print("python read", len(tensors), "tensors")
)";

// Lays files out as the reference serializer does: tensors by descending
// element size then name, "__metadata__" first, JSON padded to 8 bytes; and,
// as transformers does, shards plus an index written with sort_keys.
constexpr char kPythonWriteHuggingFaceFiles[] =
    R"(import json, os, struct, sys, torch

def save(path, tensors, metadata=None, pad=True):
    header, chunks, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in sorted(tensors.items(), key=lambda kv: (-kv[1].element_size(), kv[0])):
        raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))

DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64", torch.bool: "BOOL"}
out = sys.argv[1]
shards = [{"w": torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.25,
           "e": torch.tensor([1.5, -2.0, 3.0]).to(torch.bfloat16)},
          {"ids": torch.tensor([1, -2, 3]), "m": torch.tensor([True, False])}]
weight_map = {}
for i, shard in enumerate(shards):
    name = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
    save(os.path.join(out, name), shard, {"format": "pt"})
    weight_map.update({k: name for k in shard})
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": 68}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
save(os.path.join(out, "plain.safetensors"), shards[1], metadata=None, pad=False)
)";

class SafetensorsPythonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("safetensors_python_test_" + std::to_string(::getpid()) + "_" +
            info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    static const bool has_torch =
        std::system(
            (std::string(kPython) + " -c 'import torch' > /dev/null 2>&1")
                .c_str()) == 0;
    if (!has_torch) GTEST_SKIP() << kPython << " with torch is not installed";
  }

  // Runs `script` with argument `arg`; fails the test with its output if it
  // exits non-zero.
  void TearDown() override { fs::remove_all(dir_); }

  void RunPython(const std::string& script, const fs::path& arg) {
    const fs::path script_path = dir_ / "script.py";
    const fs::path log_path = dir_ / "python.log";
    std::ofstream(script_path) << script;
    const std::string command = std::string(kPython) + " '" +
                                script_path.string() + "' '" + arg.string() +
                                "' > '" + log_path.string() + "' 2>&1";
    const int status = std::system(command.c_str());
    EXPECT_EQ(status, 0) << command << "\n" << ReadFile(log_path);
  }

  fs::path dir_;
};

TEST_F(SafetensorsPythonTest, PythonReaderReadsOurFiles) {
  TensorMap tensors;
  tensors["f32"] = torch::arange(6, torch::kFloat).reshape({2, 3}) / 4;
  tensors["bf16"] =
      (torch::arange(4, torch::kFloat) * 1.5).to(torch::kBFloat16);
  tensors["f16"] = torch::tensor({65504.0f, -0.5f}).to(torch::kHalf);
  tensors["i64"] = torch::tensor(
      {std::numeric_limits<int64_t>::min(), int64_t{1} << 40, int64_t{7}});
  tensors["mask"] = torch::tensor({true, false, true});
  tensors["scalar"] = torch::tensor(2.5f);
  tensors["empty"] = torch::zeros({0, 3});
  ASSERT_TRUE(WriteSafetensorsDir(dir_ / "out", tensors, 1 << 20).ok());
  RunPython(std::string(kPythonReader) + kPythonCheckOurFile,
            dir_ / "out" / kSafetensorsFileName);
}

TEST_F(SafetensorsPythonTest, ReadsHuggingFaceLayoutWrittenByPython) {
  RunPython(kPythonWriteHuggingFaceFiles, dir_);
  absl::StatusOr<TensorMap> read = LoadSafetensorsDir(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 4u);
  ExpectBitIdentical(read->at("w"),
                     torch::arange(12, torch::kFloat).reshape({3, 4}) * 0.25);
  ExpectBitIdentical(read->at("e"),
                     torch::tensor({1.5f, -2.0f, 3.0f}).to(torch::kBFloat16));
  ExpectBitIdentical(read->at("ids"),
                     torch::tensor({int64_t{1}, int64_t{-2}, int64_t{3}}));
  ExpectBitIdentical(read->at("m"), torch::tensor({true, false}));

  // Unpadded header, no "__metadata__".
  read = ReadSafetensorsFile(dir_ / "plain.safetensors", torch::kFloat);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitIdentical(read->at("ids"),
                     torch::tensor({int64_t{1}, int64_t{-2}, int64_t{3}}));
}

}  // namespace
}  // namespace lockstep
