#include "orchestrator/progress_line.h"

#include <unistd.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::orchestrator {
namespace {

// 12034 -> "12,034".
std::string Grouped(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace

std::string HumanCount(double value) {
  if (!std::isfinite(value)) return "?";
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e9) return absl::StrFormat("%.1fG", value / 1e9);
  if (magnitude >= 1e6) return absl::StrFormat("%.1fM", value / 1e6);
  if (magnitude >= 1e3) return absl::StrFormat("%.1fk", value / 1e3);
  return absl::StrFormat("%.0f", value);
}

std::string HumanDuration(absl::Duration duration) {
  int64_t seconds = absl::ToInt64Seconds(duration + absl::Milliseconds(500));
  if (seconds < 60) return absl::StrCat(seconds, "s");
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  return absl::StrFormat("%dh%02dm", seconds / 3600, (seconds % 3600) / 60);
}

std::string FormatProgress(const StepRecord& record, int64_t total_steps, absl::Duration eta) {
  std::string line = absl::StrCat("step ", record.step, "/", total_steps);
  if (record.reward_mean)
    absl::StrAppend(&line, absl::StrFormat("  reward %.3f", *record.reward_mean));
  if (record.accuracy) absl::StrAppend(&line, absl::StrFormat("  acc %.3f", *record.accuracy));
  if (record.parity) {
    absl::StrAppend(&line, "  parity ", Grouped(record.parity->tokens_mismatched), "/",
                    Grouped(record.parity->tokens_compared), " mismatched");
  }
  if (record.gen_tokens_per_s) {
    absl::StrAppend(&line, "  gen ", HumanCount(*record.gen_tokens_per_s), " tok/s");
  }
  if (record.train_tokens_per_s) {
    absl::StrAppend(&line, "  train ", HumanCount(*record.train_tokens_per_s), " tok/s");
  }
  if (eta >= absl::ZeroDuration()) absl::StrAppend(&line, "  ETA ", HumanDuration(eta));
  return line;
}

ProgressLine::ProgressLine(int64_t total_steps, FILE* out, bool enabled,
                           std::optional<bool> interactive)
    : total_steps_(total_steps),
      out_(out),
      enabled_(enabled),
      interactive_(interactive.value_or(isatty(fileno(out)) == 1)) {}

void ProgressLine::Update(const StepRecord& record, absl::Time now) {
  if (!enabled_) return;
  const int64_t step = record.step;
  absl::Duration eta = -absl::Seconds(1);
  if (!first_step_) {
    first_step_ = step;
    first_time_ = now;
  } else if (step > *first_step_) {
    absl::Duration per_step = (now - first_time_) / static_cast<double>(step - *first_step_);
    eta = per_step * static_cast<double>(std::max<int64_t>(0, total_steps_ - step));
  }
  std::string line = FormatProgress(record, total_steps_, eta);
  if (interactive_) {
    // Pad over a longer previous line, then return to the start.
    std::string padding(last_line_.size() > line.size() ? last_line_.size() - line.size() : 0, ' ');
    std::fprintf(out_, "\r%s%s", line.c_str(), padding.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_line_ = line;
}

void ProgressLine::Message(const std::string& text) {
  if (interactive_ && !last_line_.empty()) {
    std::fprintf(out_, "\r%s\r%s\n%s", std::string(last_line_.size(), ' ').c_str(), text.c_str(),
                 enabled_ ? last_line_.c_str() : "");
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (enabled_ && interactive_ && !last_line_.empty()) std::fprintf(out_, "\n");
  std::fflush(out_);
  last_line_.clear();
}

}  // namespace lockstep::orchestrator
