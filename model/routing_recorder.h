// What a mixture-of-experts forward decided, for the trainer's auxiliary losses and for routing
// agreement between the generator and the trainer. A RoutingRecorder is a ForwardObserver: pass
// it to Transformer::Hidden (it records nothing from dense layers and ignores every other op).
//
//   RoutingRecorder recorder;
//   hidden = model.Hidden(batch, TrainingAttention{}, &recorder);
//   loss = policy_loss + coef * LoadBalancingLoss(recorder.RouterLogits(), config.num_experts,
//                                                 config.num_experts_per_tok);
//
// Thread safety: one recorder per forward at a time (not synchronised).
#ifndef LOCKSTEP_MODEL_ROUTING_RECORDER_H_
#define LOCKSTEP_MODEL_ROUTING_RECORDER_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/forward_observer.h"

namespace lockstep {

class RoutingRecorder final : public ForwardObserver {
 public:
  struct Layer {
    int64_t layer = -1;
    torch::Tensor router_logits;  // [tokens, num_experts], with its graph if the forward had one
    RoutingDecision routing;      // experts [tokens, k], weights [tokens, k], load [num_experts]
  };

  void OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                const std::vector<int64_t>* token_rows) override;
  void OnRouting(int64_t layer, const RoutingDecision& routing) override;

  // One entry per sparse layer and forward, in execution order (a second forward appends).
  const std::vector<Layer>& layers() const { return layers_; }
  // The router logits of every recorded layer, in order (LoadBalancingLoss's input).
  std::vector<torch::Tensor> RouterLogits() const;
  // The sparse layers recorded, ascending.
  std::vector<int64_t> SparseLayers() const;
  // Layer `layer`'s expert choices [rows, k] of every recorded forward, in record order (a
  // generator's prefill chunks and decode steps of one sequence line up with the trainer's
  // forward of it); undefined if the layer was not recorded.
  torch::Tensor Experts(int64_t layer) const;
  // Row `row`'s choices in every recorded layer, [layer][k] in record order: for a recorder
  // holding one forward, the row's routing as the generator reports it per sampled token.
  std::vector<int32_t> RowExperts(int64_t row) const;
  void Clear() { layers_.clear(); }

 private:
  std::vector<Layer> layers_;
};

// Routing agreement of two recordings of the same tokens in the same row order (e.g. a trainer's
// forward and a generator's steps): each (sparse layer, token)'s k choices in rank order,
// compared exactly. Batch-invariant mode's claim is tokens_disagreeing == 0.
struct RoutingAgreement {
  int64_t tokens_compared = 0;     // (layer, token) pairs
  int64_t tokens_disagreeing = 0;  // pairs whose choices differ (any rank)
  int64_t first_layer = -1;        // the first disagreement, layers ascending then rows
  int64_t first_row = -1;
  bool identical() const { return tokens_disagreeing == 0; }
  std::string ToString() const;
};

// Compares every sparse layer of `reference` with the same layer of `candidate`. Errors:
// InvalidArgument when a layer is missing from one side or the row counts or k differ.
absl::StatusOr<RoutingAgreement> CompareRouting(const RoutingRecorder& reference,
                                                const RoutingRecorder& candidate);

// Hugging Face's load_balancing_loss_func (Switch Transformer eqs. 4-6) without an attention
// mask, over the router logits of all layers concatenated (N rows in all):
//   p = softmax(logits) [N, E];  m[n, r, e] = 1 iff e is row n's rank-r choice (torch::topk)
//   loss = E * sum_{r, e} mean_n(m[n, r, e]) * mean_n(p[n, e])
// Differentiable in the logits (through p). A scalar float32 tensor; 0 for no logits. Qwen3-MoE
// scales it by router_aux_loss_coef; an RL trainer chooses its own coefficient (0 = off).
torch::Tensor LoadBalancingLoss(const std::vector<torch::Tensor>& router_logits,
                                int64_t num_experts, int64_t top_k);

// ST-MoE's router z-loss: mean_n (log sum_e exp(logits[n, e]))^2 over all layers' rows. Scalar
// float32; 0 for no logits.
torch::Tensor RouterZLoss(const std::vector<torch::Tensor>& router_logits);

// max_e load[e] / mean_e load[e] of one layer's expert load (1 = perfectly balanced); 0 when no
// token was routed.
double ExpertLoadImbalance(const torch::Tensor& load);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_ROUTING_RECORDER_H_
