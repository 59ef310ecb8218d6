// `lockstep diagnose` as a library: runs sequences down two execution paths and compares them
// (comparison.h), or compares one path with log-probs from elsewhere.
#ifndef LOCKSTEP_DIAGNOSE_DIAGNOSE_H_
#define LOCKSTEP_DIAGNOSE_DIAGNOSE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "diagnose/diagnose_report.h"
#include "diagnose/execution_paths.h"
#include "diagnose/path_settings.h"

namespace lockstep::diagnose {

struct DiagnoseRequest {
  std::filesystem::path model_dir;  // Hugging Face layout
  std::vector<DiagnoseSequence> sequences;
  PathSettings a;  // default: the trainer's forward
  PathSettings b;  // default: the generator's prefill + decode
  double temperature = 1.0;  // > 0; the log-probs of both paths are of softmax(logits / T)
  int64_t top_k = 5;         // for the vocabulary's top-k agreement
  // Tests only: sees path B's op outputs before they are recorded, and may perturb them.
  OutputHook* perturb_b = nullptr;
  // Progress lines ("group 2/8: A 0.41 s, B 0.87 s"); may be empty.
  std::function<void(const std::string&)> progress;
};

// The default B of a request: path=generate in `mode`.
PathSettings DefaultGeneratePath(NumericMode mode);

// Sequences go through both paths in groups as large as the largest pack / batch setting, so
// a capture holds one group at a time. Errors: InvalidArgument for bad input (a sequence of
// fewer than 2 tokens or a prompt length outside [1, n-1], a token id outside the model's
// vocabulary, no sequences), the model loader's errors, Internal for a failed forward.
absl::StatusOr<DiagnoseReport> Diagnose(const DiagnoseRequest& request);

// Path A (`request.a`) against log-probs computed elsewhere: behaviour[i] holds the
// log-probs of sequences[i]'s completion tokens. Token-level report only (has_ops false).
absl::StatusOr<DiagnoseReport> DiagnoseBehaviour(const DiagnoseRequest& request,
                                                 const std::vector<std::vector<float>>& behaviour,
                                                 const std::string& source);

// Checks every sequence against `vocab_size` and its own prompt length. InvalidArgument names
// the sequence and the token.
absl::Status ValidateSequences(const std::vector<DiagnoseSequence>& sequences, int64_t vocab_size);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_DIAGNOSE_H_
