// The generator engine: requests in, finished samples out, one Step() at a time.
//
//   Step() = apply staged weights → scheduler.Schedule() → runner.Run() → sample → finish.
//
// A request is one prompt with `n` samples. Sample 0 prefills the prompt; when its prefill ends,
// samples 1..n-1 fork from it (sharing the prompt's KV blocks, copy-on-write) and every sample
// draws its first token from the same logits row with its own random stream. Each sample's
// tokens depend only on (seed, sample index, prompt, weights): in batch-invariant mode never on
// batch composition, chunking or preemption.
//
// Weight hot-swap: InstallWeights stages a new state dict and version; the next Step applies it
// before scheduling. Sequences in flight continue (their cached keys/values stay); every token
// records the version it was sampled under. The swap itself is O(number of tensors): the staged
// tensors become the parameters by pointer (the kernels read weights in place, so nothing is
// repacked).
//
// Thread safety: PrepareWeights, InstallWeights and WeightsSnapshot may be called from any
// thread. Everything else must be called from one thread (the engine thread).
#ifndef LOCKSTEP_GENERATOR_ENGINE_H_
#define LOCKSTEP_GENERATOR_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "generator/block_manager.h"
#include "generator/model_runner.h"
#include "generator/scheduler.h"
#include "generator/sequence.h"
#include "model/routing_recorder.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace lockstep::generator {

struct EngineOptions {
  int64_t block_size = 16;
  int64_t kv_cache_bytes = int64_t{256} << 20;  // KV pool budget; see BlockManager::BytesPerBlock
  int64_t max_samples_per_request = 64;         // limit on Request::n
  SchedulerOptions scheduler;
  int64_t initial_weight_version = 0;

  absl::Status Validate() const;
};

struct Request {
  std::vector<int64_t> prompt;
  int64_t n = 1;
  SamplingParams params;
  uint64_t seed = 0;
};

// A finished sample.
struct SampleOutput {
  int64_t request_id = 0;
  int64_t sample_index = 0;
  std::vector<int64_t> prompt;
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;           // fp32 log p(token) under softmax(logits / T)
  std::vector<int64_t> weight_versions;  // version each token was sampled under
  // Mixture-of-experts models: [token][sparse layer][k] expert ids the token's row was routed
  // to, for routing agreement with the trainer; empty for dense models.
  std::vector<int32_t> routed_experts;
  FinishReason finish_reason = FinishReason::kNone;
  int64_t num_preemptions = 0;
};

class Engine {
 public:
  // The engine shares `model` (its runner is the only caller). InvalidArgument on bad options or
  // a KV budget too small for a single block.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::shared_ptr<Transformer> model,
                                                        const EngineOptions& options);

  // Queues a request; returns its id. InvalidArgument, naming the field, for an empty prompt,
  // a token id outside the vocabulary, n outside [1, max_samples_per_request], max_tokens <= 0,
  // prompt + max_tokens beyond the context or the KV pool, or bad sampling values.
  absl::StatusOr<int64_t> AddRequest(const Request& request);

  // One engine step. Returns the samples that finished in it (and those aborted since the last
  // step). Errors from the model or from installing staged weights.
  absl::StatusOr<std::vector<SampleOutput>> Step();

  // Aborts every sample of the request; they come out of the next Step with reason kAborted and
  // their blocks are freed now. Returns false if the request is unknown or already finished.
  bool Abort(int64_t request_id);

  // True iff some request has samples not yet returned by Step.
  bool HasUnfinished() const;

  // Weights checked and made ready to swap in: every tensor in the model's dtype, contiguous.
  struct PreparedWeights {
    TensorMap state;
    int64_t version = 0;
  };

  // The expensive half of a swap, on the caller's thread while steps run: validates `state`
  // (Hugging Face names, all parameters) and casts tensors to the model's dtype (and makes them
  // contiguous) where needed. InvalidArgument if a parameter is missing, mis-shaped
  // or unexpected. The tensors become the model's parameters without a copy: the caller must
  // never change them in place afterwards. Thread-safe.
  absl::StatusOr<PreparedWeights> PrepareWeights(TensorMap state, int64_t version);

  // The O(number of tensors) half: the parameters become `prepared`'s tensors (by pointer) and
  // the weight version changes. Returns the previous weights so that the caller frees
  // them off the engine thread. Engine thread only.
  absl::StatusOr<Transformer::ReleasedWeights> ApplyPreparedWeights(PreparedWeights prepared);

  // PrepareWeights, then stages the result to be applied before the next step. A later call
  // replaces an earlier one not yet applied. Thread-safe.
  absl::Status InstallWeights(TensorMap state, int64_t version);

  // Applies staged weights now, if any (Step does this first anyway). Engine thread only.
  absl::StatusOr<Transformer::ReleasedWeights> ApplyStagedWeights();

  // The weights the engine runs now and their version: handles sharing the parameters' storage
  // (never changed in place: a swap points the parameters at new tensors). Thread-safe.
  std::pair<int64_t, TensorMap> WeightsSnapshot() const;

  int64_t weight_version() const { return weight_version_; }
  const BlockManager& block_manager() const { return block_manager_; }
  int64_t num_waiting() const { return scheduler_.num_waiting(); }
  int64_t num_running() const { return scheduler_.num_running(); }

 private:
  struct RequestState {
    std::vector<std::unique_ptr<Sequence>> samples;
    std::vector<Sequence*> pending_forks;  // samples 1..n-1 until sample 0's prefill ends
    int64_t num_unfinished = 0;
  };

  Engine(std::shared_ptr<Transformer> model, const EngineOptions& options, int64_t num_blocks);
  void PublishWeightsSnapshot();  // engine thread, after the parameters changed
  // Finishes seq (frees its blocks) and queues its output.
  void FinishSample(Sequence* seq, FinishReason reason);
  FinishReason StopReason(const Sequence& seq) const;

  EngineOptions options_;
  int64_t max_context_;
  NumericMode mode_;
  BlockManager block_manager_;
  Scheduler scheduler_;
  ModelRunner runner_;
  bool sparse_;               // the model has mixture-of-experts layers
  RoutingRecorder routing_;   // the last forward's routing (sparse models only)
  int64_t weight_version_;
  int64_t next_request_id_ = 0;
  std::map<int64_t, RequestState> requests_;
  std::vector<SampleOutput> finished_;  // returned by the next Step

  mutable std::mutex staged_mu_;
  std::optional<PreparedWeights> staged_ ABSL_GUARDED_BY(staged_mu_);
  TensorMap snapshot_ ABSL_GUARDED_BY(staged_mu_);
  int64_t snapshot_version_ ABSL_GUARDED_BY(staged_mu_) = 0;
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_ENGINE_H_
