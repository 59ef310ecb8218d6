#include "trainer/checkpoint_manager.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"

namespace lockstep::trainer {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTokenizerFiles[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt",     "generation_config.json"};

std::string Hex(const unsigned char* bytes, unsigned int length) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

absl::Status ErrnoError(const fs::path& path, const std::string& what) {
  return absl::ErrnoToStatus(errno, absl::StrCat(path.string(), ": ", what));
}

// Writes `content` to `path` and fsyncs it.
absl::Status WriteFileDurably(const fs::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(path, "cannot create");
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError(path, "write failed");
      ::close(fd);
      return s;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status s = ErrnoError(path, "fsync failed");
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return ErrnoError(path, "close failed");
  return absl::OkStatus();
}

absl::Status SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(dir, "cannot open directory");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoError(dir, "fsync failed");
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Test only (tests/faults): LOCKSTEP_TEST_CHECKPOINT_STALL_STEP=N makes the write of step N's
// checkpoint stop for up to 10 minutes after its files are in the .tmp directory and before its
// manifest and rename, so that a test can kill -9 the process mid-write deterministically.
void StallForTest(int64_t step) {
  const char* stall_step = std::getenv("LOCKSTEP_TEST_CHECKPOINT_STALL_STEP");
  if (stall_step == nullptr || std::strtoll(stall_step, nullptr, 10) != step) return;
  std::this_thread::sleep_for(std::chrono::minutes(10));
}

bool IsStepDirName(const std::string& name) {
  if (name.size() < 6 || name.rfind("step_", 0) != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  return Hex(digest, length);
}

absl::StatusOr<std::string> Sha256File(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx, buffer.data(), static_cast<size_t>(in.gcount()));
  }
  const bool read_ok = in.eof();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  if (!read_ok) return absl::DataLossError(absl::StrCat(path.string(), ": read failed"));
  return Hex(digest, length);
}

CheckpointManager::CheckpointManager(fs::path root, int64_t keep_last, std::string tokenizer_dir)
    : root_(std::move(root)), keep_last_(keep_last), tokenizer_dir_(std::move(tokenizer_dir)) {}

std::string CheckpointManager::StepDirName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%06lld", static_cast<long long>(step));
  return name;
}

absl::StatusOr<fs::path> CheckpointManager::Save(int64_t step, const Transformer& model,
                                                 const CheckpointPayload& payload) const {
  TensorMap weights;
  for (const auto& [name, tensor] : StateDict(model)) weights[name] = tensor.detach();
  return Save(step, model.config(), weights, payload);
}

absl::StatusOr<fs::path> CheckpointManager::Save(int64_t step, const ModelConfig& model_config,
                                                 const TensorMap& weights,
                                                 const CheckpointPayload& payload) const {
  std::error_code error;
  fs::create_directories(root_, error);
  if (error) {
    return absl::InternalError(absl::StrCat(root_.string(), ": cannot create: ", error.message()));
  }
  const fs::path final_dir = root_ / StepDirName(step);
  const fs::path tmp = root_ / (StepDirName(step) + ".tmp");
  fs::remove_all(tmp, error);
  fs::create_directories(tmp, error);
  if (error) {
    return absl::InternalError(absl::StrCat(tmp.string(), ": cannot create: ", error.message()));
  }
  // Model in Hugging Face layout, fp32 (the master weights, so that a resume is exact).
  ModelConfig config = model_config;
  config.torch_dtype = StorageDtype::kFloat32;
  absl::Status s = WriteFileDurably(tmp / "config.json", ConfigToJson(config));
  const std::map<std::string, std::string> pt = {{"format", "pt"}};
  if (s.ok()) s = WriteSafetensorsFile(tmp / kSafetensorsFileName, weights, pt);
  if (s.ok() && !tokenizer_dir_.empty()) {
    for (const char* name : kTokenizerFiles) {
      const fs::path source = fs::path(tokenizer_dir_) / name;
      if (!fs::exists(source)) continue;
      absl::StatusOr<std::string> bytes = ReadFile(source);
      s = bytes.ok() ? WriteFileDurably(tmp / name, *bytes) : bytes.status();
      if (!s.ok()) break;
    }
  }
  if (s.ok()) s = WriteSafetensorsFile(tmp / kOptimizerFileName, payload.optimizer, pt);
  if (s.ok() && !payload.extra.empty()) {
    s = WriteSafetensorsFile(tmp / kExtraTensorsFileName, payload.extra, pt);
  }
  if (s.ok()) s = WriteFileDurably(tmp / kTrainerStateFileName, payload.trainer_state);
  if (s.ok()) StallForTest(step);
  // Manifest: size and SHA-256 of every file, in name order.
  if (s.ok()) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(tmp)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    nlohmann::json manifest;
    manifest["step"] = step;
    manifest["files"] = nlohmann::json::object();
    for (const fs::path& file : files) {
      absl::StatusOr<std::string> sha = Sha256File(file);
      if (!sha.ok()) {
        s = sha.status();
        break;
      }
      manifest["files"][file.filename().string()] = {{"bytes", fs::file_size(file)},
                                                     {"sha256", *sha}};
    }
    if (s.ok()) s = WriteFileDurably(tmp / kManifestFileName, manifest.dump(2));
  }
  if (s.ok()) s = SyncDirectory(tmp);
  if (s.ok()) {
    fs::remove_all(final_dir, error);
    fs::rename(tmp, final_dir, error);
    if (error) {
      s = absl::InternalError(absl::StrCat(tmp.string(), ": cannot rename to ", final_dir.string(),
                                           ": ", error.message()));
    }
  }
  if (s.ok()) s = SyncDirectory(root_);
  if (!s.ok()) {
    fs::remove_all(tmp, error);
    return s;
  }
  // Keep the newest keep_last step directories.
  if (keep_last_ > 0) {
    std::vector<fs::path> steps = ListSteps();
    for (size_t i = 0; i + static_cast<size_t>(keep_last_) < steps.size(); ++i) {
      fs::remove_all(steps[i], error);
    }
  }
  return final_dir;
}

std::vector<fs::path> CheckpointManager::ListSteps() const {
  std::vector<std::pair<int64_t, fs::path>> steps;
  std::error_code error;
  if (!fs::is_directory(root_, error)) return {};
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && IsStepDirName(name)) {
      steps.emplace_back(std::stoll(name.substr(5)), entry.path());
    }
  }
  std::sort(steps.begin(), steps.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : steps) out.push_back(path);
  return out;
}

absl::Status CheckpointManager::Verify(const fs::path& step_dir) {
  if (!fs::is_directory(step_dir)) {
    return absl::NotFoundError(absl::StrCat(step_dir.string(), ": no such checkpoint directory"));
  }
  const fs::path manifest_path = step_dir / kManifestFileName;
  if (!fs::exists(manifest_path)) {
    return absl::DataLossError(
        absl::StrCat(manifest_path.string(), ": missing (torn or incomplete checkpoint)"));
  }
  absl::StatusOr<std::string> text = ReadFile(manifest_path);
  if (!text.ok()) return text.status();
  nlohmann::json manifest = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.contains("files") || !manifest["files"].is_object()) {
    return absl::DataLossError(absl::StrCat(manifest_path.string(), ": malformed manifest"));
  }
  for (const char* required :
       {"config.json", kSafetensorsFileName, kOptimizerFileName, kTrainerStateFileName}) {
    if (!manifest["files"].contains(required)) {
      return absl::DataLossError(
          absl::StrCat(manifest_path.string(), ": does not list ", required));
    }
  }
  try {
    for (const auto& [name, entry] : manifest["files"].items()) {
      const fs::path file = step_dir / name;
      if (name.find('/') != std::string::npos || name == "..") {
        return absl::DataLossError(
            absl::StrCat(manifest_path.string(), ": bad file name '", name, "'"));
      }
      if (!fs::exists(file)) {
        return absl::DataLossError(absl::StrCat(file.string(), ": missing (listed in manifest)"));
      }
      const uint64_t expected_bytes = entry.at("bytes").get<uint64_t>();
      const uint64_t bytes = fs::file_size(file);
      if (bytes != expected_bytes) {
        return absl::DataLossError(absl::StrCat(file.string(), ": ", bytes,
                                                " bytes, manifest says ", expected_bytes,
                                                " (truncated or changed)"));
      }
      absl::StatusOr<std::string> sha = Sha256File(file);
      if (!sha.ok()) return sha.status();
      if (*sha != entry.at("sha256").get<std::string>()) {
        return absl::DataLossError(
            absl::StrCat(file.string(), ": SHA-256 does not match the manifest (corrupted)"));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(manifest_path.string(), ": malformed: ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedCheckpoint> CheckpointManager::Load(const fs::path& path) {
  fs::path dir = path.filename().empty() ? path.parent_path() : path;
  if (!IsStepDirName(dir.filename().string()) && !fs::exists(dir / kManifestFileName)) {
    const fs::path root = dir;
    // A root: its newest step that verifies.
    std::vector<fs::path> steps = CheckpointManager(root, 0).ListSteps();
    if (steps.empty()) {
      return absl::NotFoundError(absl::StrCat(root.string(), ": no step_* checkpoints"));
    }
    absl::Status last;
    dir.clear();
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      last = Verify(*it);
      if (last.ok()) {
        dir = *it;
        break;
      }
    }
    if (dir.empty()) {
      return absl::NotFoundError(
          absl::StrCat(root.string(), ": no valid checkpoint; newest failure: ", last.message()));
    }
  } else if (absl::Status s = Verify(dir); !s.ok()) {
    return s;
  }
  LoadedCheckpoint out;
  out.dir = dir;
  absl::StatusOr<TensorMap> model =
      ReadSafetensorsFile(dir / kSafetensorsFileName, torch::kFloat32);
  if (!model.ok()) return model.status();
  out.model = std::move(*model);
  absl::StatusOr<TensorMap> optimizer = ReadSafetensorsFile(dir / kOptimizerFileName);
  if (!optimizer.ok()) return optimizer.status();
  out.payload.optimizer = std::move(*optimizer);
  if (fs::exists(dir / kExtraTensorsFileName)) {
    absl::StatusOr<TensorMap> extra = ReadSafetensorsFile(dir / kExtraTensorsFileName);
    if (!extra.ok()) return extra.status();
    out.payload.extra = std::move(*extra);
  }
  absl::StatusOr<std::string> state = ReadFile(dir / kTrainerStateFileName);
  if (!state.ok()) return state.status();
  out.payload.trainer_state = std::move(*state);
  return out;
}

}  // namespace lockstep::trainer
