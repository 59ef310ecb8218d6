// guess_number: the example multi-turn environment. The environment picks a whole number in
// [min, max]; each model turn is a guess (the last integer in the turn's text), answered with
// "Higher." or "Lower." as a user message, until the guess is right (reward 1, done) or the
// guesses run out (reward 0, done). Small enough to read in one sitting; real enough to test the
// episode driver and the Environment protocol end to end.
//
// The secret is the item's reference answer when that is an integer in range, else drawn from
// the episode's seed, so that an episode is reproducible.
#ifndef LOCKSTEP_REWARDS_GUESS_NUMBER_ENV_H_
#define LOCKSTEP_REWARDS_GUESS_NUMBER_ENV_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "rewards/environment.h"

namespace lockstep::rewards {

struct GuessNumberOptions {
  int64_t min = 1;
  int64_t max = 100;
  int max_guesses = 7;  // also reported as ResetResult::max_turns
};

// The last (optionally signed) integer in `text`, if any.
std::optional<int64_t> LastInteger(absl::string_view text);

// Thread-safe: episodes live in a map guarded by a mutex.
class GuessNumberEnvironment final : public Environment {
 public:
  explicit GuessNumberEnvironment(GuessNumberOptions options = {});

  std::string name() const override { return "guess_number"; }
  absl::StatusOr<ResetResult> Reset(const EpisodeStart& start) override;
  // Sub-scores: "solved" (1/0) and "guesses" on the final step; "invalid" (1) for a turn with no
  // number in it (which still uses up a guess).
  absl::StatusOr<StepResult> Step(const StepInput& input) override;
  absl::Status Close(absl::string_view episode_id) override;

  // Episodes started and not yet finished or closed.
  int num_open_episodes() const;

 private:
  struct Episode {
    int64_t secret = 0;
    int num_guesses = 0;
  };

  const GuessNumberOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Episode, std::less<>> episodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_GUESS_NUMBER_ENV_H_
