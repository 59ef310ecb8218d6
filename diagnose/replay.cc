#include "diagnose/replay.h"

#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "diagnose/diagnose.h"
#include "diagnose/mismatch_record.h"
#include "model/parity.h"

namespace lockstep::diagnose {

absl::StatusOr<DiagnoseReport> ReplayRun(const ReplayRequest& request) {
  absl::StatusOr<std::vector<MismatchRecord>> all = ReadMismatchRecords(request.run_dir);
  if (!all.ok()) return all.status();
  std::set<int64_t> steps;
  for (const MismatchRecord& r : *all) steps.insert(r.step);
  const int64_t step = request.step.value_or(*steps.begin());
  if (!steps.count(step)) {
    return absl::NotFoundError(absl::StrCat("no mismatch records of step ", step, " (steps with records: ",
                                            absl::StrJoin(steps, ", "), ")"));
  }
  std::vector<MismatchRecord> records;
  for (const MismatchRecord& r : *all) {
    if (r.step == step) records.push_back(r);
  }
  const MismatchRecord& first = records.front();
  for (const MismatchRecord& r : records) {
    if (r.weights_dir != first.weights_dir || r.temperature != first.temperature ||
        r.generator_mode != first.generator_mode || r.trainer_mode != first.trainer_mode) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mismatch records of step ", step, " disagree on weights or settings"));
    }
  }
  std::filesystem::path weights = first.weights_dir;
  if (weights.is_relative()) weights = request.run_dir / weights;
  if (!std::filesystem::exists(weights / "config.json")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the weights of version ", first.weight_version, " are not at ", weights.string()));
  }
  if (request.progress) {
    request.progress(absl::StrCat("diagnose: replaying ", records.size(), " rollouts of step ",
                                  step, " (weights version ", first.weight_version, ", ",
                                  weights.string(), ")"));
  }

  DiagnoseRequest diagnose;
  diagnose.model_dir = weights;
  diagnose.top_k = request.top_k;
  diagnose.progress = request.progress;
  // A greedy sampler reports log-probs at temperature 1.
  diagnose.temperature = first.temperature > 0 ? first.temperature : 1.0;
  PathSettings a, b;
  a.path = PathKind::kTrain;
  b.path = PathKind::kGenerate;
  absl::StatusOr<NumericMode> trainer_mode = ParseNumericMode(first.trainer_mode);
  absl::StatusOr<NumericMode> generator_mode = ParseNumericMode(first.generator_mode);
  if (!trainer_mode.ok() || !generator_mode.ok()) {
    return absl::InvalidArgumentError("mismatch record: unknown numeric mode");
  }
  a.mode = *trainer_mode;
  a.threads = first.trainer_threads;
  b.mode = *generator_mode;
  b.threads = first.generator_threads;
  absl::StatusOr<PathSettings> parsed_a = ParsePathSettings(request.a_overrides, a);
  if (!parsed_a.ok()) return parsed_a.status();
  absl::StatusOr<PathSettings> parsed_b = ParsePathSettings(request.b_overrides, b);
  if (!parsed_b.ok()) return parsed_b.status();
  diagnose.a = *parsed_a;
  diagnose.b = *parsed_b;
  for (const MismatchRecord& r : records) {
    DiagnoseSequence sequence;
    sequence.tokens = r.prompt_tokens;
    sequence.tokens.insert(sequence.tokens.end(), r.completion_tokens.begin(),
                           r.completion_tokens.end());
    sequence.prompt_length = static_cast<int64_t>(r.prompt_tokens.size());
    diagnose.sequences.push_back(std::move(sequence));
  }
  absl::StatusOr<DiagnoseReport> report = Diagnose(diagnose);
  if (!report.ok()) return report.status();

  // The replayed generator path against the recorded generator, token by token.
  ParityAccumulator tokens;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<float>& recorded = records[i].generator_logprobs;
    const std::vector<float>& replayed = report->sequences[i].logprobs_b;
    for (size_t j = 0; j < recorded.size() && j < replayed.size(); ++j) {
      tokens.Add(static_cast<int64_t>(i), static_cast<int64_t>(j), replayed[j], recorded[j]);
    }
  }
  const ParityReport replay_parity = tokens.Finish();
  ReplayCheck check;
  check.records = static_cast<int64_t>(records.size());
  check.tokens_compared = replay_parity.tokens_compared;
  check.tokens_differing = replay_parity.tokens_differing;
  check.max_abs_diff = replay_parity.max_abs_diff;
  report->replay = check;
  report->identical = report->identical && check.reproduced();
  return report;
}

}  // namespace lockstep::diagnose
