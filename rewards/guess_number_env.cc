#include "rewards/guess_number_env.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep::rewards {
namespace {

// SplitMix64: a good 64-bit mix of the seed, so that nearby seeds give unrelated secrets.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::optional<int64_t> LastInteger(absl::string_view text) {
  size_t end = text.size();
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(text[end - 1]))) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(text[begin - 1]))) --begin;
  if (begin > 0 && text[begin - 1] == '-') --begin;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text.substr(begin, end - begin), &value)) return std::nullopt;
  return value;
}

GuessNumberEnvironment::GuessNumberEnvironment(GuessNumberOptions options) : options_(options) {}

absl::StatusOr<ResetResult> GuessNumberEnvironment::Reset(const EpisodeStart& start) {
  if (start.episode_id.empty()) return absl::InvalidArgumentError("guess_number: empty episode_id");
  Episode episode;
  int64_t reference = 0;
  if (absl::SimpleAtoi(start.reference, &reference) && reference >= options_.min &&
      reference <= options_.max) {
    episode.secret = reference;
  } else {
    const auto range = static_cast<uint64_t>(options_.max - options_.min + 1);
    episode.secret = options_.min + static_cast<int64_t>(Mix(start.seed) % range);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!episodes_.emplace(start.episode_id, episode).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("guess_number: episode ", start.episode_id, " already exists"));
    }
  }
  ResetResult result;
  result.observation.role = "user";
  result.observation.text =
      absl::StrCat("I am thinking of a whole number from ", options_.min, " to ", options_.max,
                   ". You have ", options_.max_guesses, " guesses. Answer with one number.");
  result.max_turns = options_.max_guesses;
  return result;
}

absl::StatusOr<StepResult> GuessNumberEnvironment::Step(const StepInput& input) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = episodes_.find(input.episode_id);
  if (it == episodes_.end()) {
    return absl::NotFoundError(absl::StrCat("guess_number: no open episode ", input.episode_id));
  }
  Episode& episode = it->second;
  ++episode.num_guesses;
  const std::optional<int64_t> guess = LastInteger(input.action);
  StepResult result;
  result.observation.role = "user";
  const bool solved = guess.has_value() && *guess == episode.secret;
  if (solved || episode.num_guesses >= options_.max_guesses) {
    result.done = true;
    result.reward = solved ? 1.0 : 0.0;
    result.sub_scores["solved"] = solved ? 1.0 : 0.0;
    result.sub_scores["guesses"] = episode.num_guesses;
    result.observation.text =
        solved ? "Correct!" : absl::StrCat("Out of guesses. It was ", episode.secret, ".");
    episodes_.erase(it);
    return result;
  }
  const int guesses_left = options_.max_guesses - episode.num_guesses;
  if (!guess.has_value()) {
    result.sub_scores["invalid"] = 1.0;
    result.observation.text =
        absl::StrCat("I found no number in your answer. ", guesses_left, " guesses left.");
  } else {
    result.observation.text = absl::StrCat(*guess < episode.secret ? "Higher." : "Lower.", " ",
                                           guesses_left, " guesses left.");
  }
  return result;
}

absl::Status GuessNumberEnvironment::Close(absl::string_view episode_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = episodes_.find(episode_id);
  if (it != episodes_.end()) episodes_.erase(it);
  return absl::OkStatus();
}

int GuessNumberEnvironment::num_open_episodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(episodes_.size());
}

}  // namespace lockstep::rewards
