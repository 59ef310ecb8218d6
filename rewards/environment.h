// The multi-turn environment interface: an episode is Reset, then one Step per model turn until
// a Step says done (proto/reward.proto, service lockstep.v1.Environment, has the same shape).
//
// In-process environments (guess_number_env.h) implement it directly; EnvironmentClient
// (environment_client.h) implements it over gRPC, so the episode driver (episode.h) and the
// orchestrator cannot tell them apart. EnvironmentService (environment_service.h) serves any
// Environment over gRPC. Nothing here depends on gRPC or protobuf.
#ifndef LOCKSTEP_REWARDS_ENVIRONMENT_H_
#define LOCKSTEP_REWARDS_ENVIRONMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::rewards {

// What the environment appends to the context. Its tokens are masked out of the loss.
struct Observation {
  // Text, tokenized by the caller with the policy's tokenizer. With `role` set (e.g. "user",
  // "tool") the caller wraps it as a chat message of that role; with `role` empty it is appended
  // verbatim.
  std::string text;
  std::string role;
  // Token ids to append as they are (the environment did its own templating); when set, `text`
  // and `role` are ignored.
  std::optional<std::vector<int32_t>> token_ids;

  bool empty() const { return token_ids ? token_ids->empty() : text.empty(); }
};

struct EpisodeStart {
  std::string episode_id;  // unique per episode; every Step repeats it
  std::string prompt;
  std::vector<std::pair<std::string, std::string>> messages;  // (role, content), may be empty
  std::string reference;
  std::map<std::string, std::string> metadata;
  uint64_t seed = 0;  // for the environment's randomness, so that episodes are reproducible
};

struct ResetResult {
  Observation observation;  // appended after the prompt before the first model turn
  int max_turns = 0;        // the environment's own limit on model turns (0: none)
};

struct StepInput {
  std::string episode_id;
  std::string action;                     // the model's turn as text
  std::vector<int32_t> action_token_ids;  // and as token ids
};

struct StepResult {
  Observation observation;  // appended after the model's turn when not done
  double reward = 0.0;      // the episode's return is the sum over its steps
  std::map<std::string, double> sub_scores;
  bool done = false;
};

class Environment {
 public:
  virtual ~Environment() = default;

  // Short name for logs and errors, e.g. "guess_number".
  virtual std::string name() const = 0;

  // Starts an episode. AlreadyExists for an episode_id in use.
  virtual absl::StatusOr<ResetResult> Reset(const EpisodeStart& start) = 0;

  // Applies one model turn. NotFound for an unknown or finished episode. Any other error means
  // the step could not be processed: the episode is failed, not scored 0.
  virtual absl::StatusOr<StepResult> Step(const StepInput& input) = 0;

  // Frees an episode early (the caller gave up on it). Idempotent: OK for unknown episodes.
  virtual absl::Status Close(absl::string_view episode_id) = 0;

  // Thread safety: implementations are safe to call concurrently for different episodes.
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_ENVIRONMENT_H_
