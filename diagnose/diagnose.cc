#include "diagnose/diagnose.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "diagnose/comparison.h"
#include "model/checkpoint.h"

namespace lockstep::diagnose {
namespace {

// Models by (mode, dtype): two paths with the same numerics share one instance.
class ModelCache {
 public:
  explicit ModelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  absl::StatusOr<Transformer*> Get(const PathSettings& settings) {
    const auto key = std::make_pair(static_cast<int>(settings.mode),
                                    static_cast<int>(settings.dtype));
    auto it = models_.find(key);
    if (it != models_.end()) return it->second.get();
    ModelOptions options;
    options.numeric_mode = settings.mode;
    options.compute_dtype = settings.dtype;
    absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModel(dir_, options);
    if (!model.ok()) return model.status();
    Transformer* raw = model->get();
    models_[key] = *std::move(model);
    return raw;
  }

 private:
  std::filesystem::path dir_;
  std::map<std::pair<int, int>, std::shared_ptr<Transformer>> models_;
};

int64_t GroupSize(const PathSettings& settings) {
  return settings.path == PathKind::kTrain ? settings.pack : settings.batch;
}

absl::Status ValidateRequest(const DiagnoseRequest& request) {
  if (request.sequences.empty()) return absl::InvalidArgumentError("diagnose: no sequences");
  if (!(request.temperature > 0)) {
    return absl::InvalidArgumentError("diagnose: temperature must be > 0");
  }
  if (request.top_k < 1) return absl::InvalidArgumentError("diagnose: top-k must be >= 1");
  return absl::OkStatus();
}

}  // namespace

PathSettings DefaultGeneratePath(NumericMode mode) {
  PathSettings settings;
  settings.path = PathKind::kGenerate;
  settings.mode = mode;
  return settings;
}

absl::Status ValidateSequences(const std::vector<DiagnoseSequence>& sequences,
                               int64_t vocab_size) {
  for (size_t s = 0; s < sequences.size(); ++s) {
    const DiagnoseSequence& sequence = sequences[s];
    const int64_t n = static_cast<int64_t>(sequence.tokens.size());
    if (n < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s, " has ", n, " tokens; diagnose needs at least 2"));
    }
    if (sequence.prompt_length < 1 || sequence.prompt_length >= n) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": prompt length ",
                                                     sequence.prompt_length,
                                                     " is outside [1, ", n - 1, "]"));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (sequence.tokens[i] < 0 || sequence.tokens[i] >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", s, ", position ", i, ": token id ", sequence.tokens[i],
            " is outside the model's vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DiagnoseReport> Diagnose(const DiagnoseRequest& request) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  ModelCache models(request.model_dir);
  absl::StatusOr<Transformer*> model_a = models.Get(request.a);
  if (!model_a.ok()) return model_a.status();
  absl::StatusOr<Transformer*> model_b = models.Get(request.b);
  if (!model_b.ok()) return model_b.status();
  const ModelConfig& config = (*model_a)->config();
  if (absl::Status s = ValidateSequences(request.sequences, config.vocab_size); !s.ok()) return s;

  Comparison comparison(config.num_hidden_layers, config.HasQkNorm(), request.top_k);
  const int64_t count = static_cast<int64_t>(request.sequences.size());
  const int64_t group = std::max(GroupSize(request.a), GroupSize(request.b));
  const int64_t num_groups = (count + group - 1) / group;
  double seconds_a = 0, seconds_b = 0;
  int64_t peak_bytes = 0;
  for (int64_t g = 0; g < num_groups; ++g) {
    const int64_t begin = g * group;
    const std::vector<DiagnoseSequence> sequences(
        request.sequences.begin() + begin,
        request.sequences.begin() + std::min(count, begin + group));
    absl::StatusOr<PathRun> a = RunPath(**model_a, sequences, request.a, request.temperature);
    if (!a.ok()) return a.status();
    absl::StatusOr<PathRun> b =
        RunPath(**model_b, sequences, request.b, request.temperature, request.perturb_b);
    if (!b.ok()) return b.status();
    comparison.AddGroup(sequences, begin, *a, *b);
    seconds_a += a->seconds;
    seconds_b += b->seconds;
    peak_bytes = std::max(peak_bytes, a->capture->bytes() + b->capture->bytes());
    if (request.progress) {
      request.progress(absl::StrFormat("diagnose: group %d/%d (%d sequences): A %.2f s, B %.2f s",
                                       g + 1, num_groups, sequences.size(), a->seconds,
                                       b->seconds));
    }
  }
  absl::StatusOr<DiagnoseReport> report = comparison.Finish();
  if (!report.ok()) return report.status();
  report->a_settings = request.a.ToString();
  report->b_settings = request.b.ToString();
  report->seconds_a = seconds_a;
  report->seconds_b = seconds_b;
  report->capture_bytes_peak = peak_bytes;
  return report;
}

absl::StatusOr<DiagnoseReport> DiagnoseBehaviour(const DiagnoseRequest& request,
                                                 const std::vector<std::vector<float>>& behaviour,
                                                 const std::string& source) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  ModelCache models(request.model_dir);
  absl::StatusOr<Transformer*> model = models.Get(request.a);
  if (!model.ok()) return model.status();
  const ModelConfig& config = (*model)->config();
  if (absl::Status s = ValidateSequences(request.sequences, config.vocab_size); !s.ok()) return s;
  if (behaviour.size() != request.sequences.size()) {
    return absl::InvalidArgumentError("diagnose: one behaviour log-prob list per sequence needed");
  }
  // Only log-probs are compared: no observer, and the sequences go down path A in the groups
  // its settings describe (pack for train, batch for generate), as Diagnose runs them.
  Comparison comparison(config.num_hidden_layers, config.HasQkNorm(), request.top_k);
  const int64_t count = static_cast<int64_t>(request.sequences.size());
  const int64_t group = GroupSize(request.a);
  double seconds = 0;
  for (int64_t begin = 0; begin < count; begin += group) {
    const std::vector<DiagnoseSequence> sequences(
        request.sequences.begin() + begin,
        request.sequences.begin() + std::min(count, begin + group));
    absl::StatusOr<PathRun> a = RunPath(**model, sequences, request.a, request.temperature,
                                        /*perturb=*/nullptr, /*observe=*/false);
    if (!a.ok()) return a.status();
    seconds += a->seconds;
    for (size_t i = 0; i < sequences.size(); ++i) {
      const size_t s = static_cast<size_t>(begin) + i;
      if (behaviour[s].size() != a->logprobs[i].size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": sequence ", s, " has ", behaviour[s].size(), " log-probs for ",
            a->logprobs[i].size(), " completion tokens"));
      }
      comparison.AddTokensOnly(sequences[i], static_cast<int64_t>(s), a->logprobs[i],
                               behaviour[s]);
    }
  }
  absl::StatusOr<DiagnoseReport> report = comparison.Finish();
  if (!report.ok()) return report.status();
  report->a_settings = request.a.ToString();
  report->b_settings = absl::StrCat("behaviour ", source);
  report->seconds_a = seconds;
  return report;
}

}  // namespace lockstep::diagnose
