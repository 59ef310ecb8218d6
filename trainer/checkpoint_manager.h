// Trainer checkpoints on disk: one directory per step under a root,
//
//   <root>/step_000123/
//     config.json, model.safetensors   Hugging Face layout (fp32), loadable by HF tooling
//     <tokenizer files>                copied from a source directory when one is given
//     optimizer.safetensors            AdamW state (exp_avg.*, exp_avg_sq.*, step)
//     extra.safetensors                other tensors (e.g. the KL reference weights), optional
//     trainer_state.json               step, weight version, RNG state, data cursor, options
//     manifest.json                    {"files": {name: {"bytes": n, "sha256": hex}}}
//
// Writes are atomic: everything goes into `step_000123.tmp/`, files are fsynced, then the
// directory is renamed. Loading verifies the manifest (every file present, same size, same
// SHA-256) and names the file that fails. Only the newest `keep_last` step directories are kept.
//
// Thread safety: a CheckpointManager has no mutable state; concurrent Saves to one root are not
// supported (only rank 0 writes, through one CheckpointWriter, which writes one at a time).
#ifndef LOCKSTEP_TRAINER_CHECKPOINT_MANAGER_H_
#define LOCKSTEP_TRAINER_CHECKPOINT_MANAGER_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace lockstep::trainer {

inline constexpr char kOptimizerFileName[] = "optimizer.safetensors";
inline constexpr char kExtraTensorsFileName[] = "extra.safetensors";
inline constexpr char kTrainerStateFileName[] = "trainer_state.json";
inline constexpr char kManifestFileName[] = "manifest.json";

// What a checkpoint holds besides the model.
struct CheckpointPayload {
  TensorMap optimizer;        // AdamW::StateDict()
  TensorMap extra;            // may be empty (then no extra.safetensors)
  std::string trainer_state;  // JSON text
};

struct LoadedCheckpoint {
  std::filesystem::path dir;
  TensorMap model;  // fp32, Hugging Face names
  CheckpointPayload payload;
};

// Lower-case hex SHA-256 of a file's bytes. NotFound / the OS error naming the file.
absl::StatusOr<std::string> Sha256File(const std::filesystem::path& path);
// Lower-case hex SHA-256 of a byte string.
std::string Sha256Hex(const std::string& bytes);

class CheckpointManager {
 public:
  // `root`: where step directories live (created on the first Save). `keep_last` <= 0 keeps
  // all. `tokenizer_dir`: when not empty, its tokenizer files (tokenizer.json,
  // tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt,
  // generation_config.json, whichever exist) are copied into every checkpoint.
  CheckpointManager(std::filesystem::path root, int64_t keep_last, std::string tokenizer_dir = "");

  // "step_000123" for 123.
  static std::string StepDirName(int64_t step);

  // Writes the checkpoint of `step` atomically and prunes old ones; returns the step directory.
  // An existing directory for the same step is replaced. Errors name the file being written.
  absl::StatusOr<std::filesystem::path> Save(int64_t step, const Transformer& model,
                                             const CheckpointPayload& payload) const;
  // The same from the model's config and its weights (Hugging Face names, fp32), e.g. a
  // snapshot of them (checkpoint_writer.h).
  absl::StatusOr<std::filesystem::path> Save(int64_t step, const ModelConfig& model_config,
                                             const TensorMap& weights,
                                             const CheckpointPayload& payload) const;

  // The step directory Save(step, ...) writes.
  std::filesystem::path StepDir(int64_t step) const { return root_ / StepDirName(step); }

  // Step directories under the root, oldest first (ignoring *.tmp and other entries).
  std::vector<std::filesystem::path> ListSteps() const;

  // Reads a step directory, or a root (its newest step that verifies; NotFound if none does).
  // DataLoss naming the file for a missing, truncated or altered file.
  static absl::StatusOr<LoadedCheckpoint> Load(const std::filesystem::path& path);

  // Checks a step directory against its manifest. DataLoss naming the file, NotFound when the
  // directory or its manifest is missing.
  static absl::Status Verify(const std::filesystem::path& step_dir);

 private:
  std::filesystem::path root_;
  int64_t keep_last_;
  std::string tokenizer_dir_;
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_CHECKPOINT_MANAGER_H_
