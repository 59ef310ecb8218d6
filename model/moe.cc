#include "model/moe.h"

#include <vector>

#include "model/mlp.h"
#include "model/ops.h"

namespace lockstep {
namespace {

// The (token, rank) slots of a forward, slot = token * k + rank, grouped by expert.
struct ExpertGroups {
  torch::Tensor slots;     // [tokens * k]: expert 0's slots, then expert 1's, ... (each ascending)
  torch::Tensor tokens;    // [tokens * k]: slots / k, the token of each grouped slot
  torch::Tensor position;  // [tokens * k]: where slot s sits in `slots`
  torch::Tensor load;      // [num_experts]: slots of each expert
  std::vector<int64_t>
      offsets;  // [num_experts + 1]: expert e's slots are [offsets[e], offsets[e+1])
};

// A counting sort of the flat choices (exact integer work, the same in every mode).
ExpertGroups GroupByExpert(const torch::Tensor& experts, int64_t num_experts) {
  const torch::Tensor choices = experts.contiguous();
  const int64_t num_slots = choices.numel();
  const int64_t k = choices.size(1);
  const int64_t* expert = choices.data_ptr<int64_t>();
  ExpertGroups groups;
  groups.load = torch::zeros({num_experts}, torch::kInt64);
  int64_t* load = groups.load.data_ptr<int64_t>();
  for (int64_t s = 0; s < num_slots; ++s) ++load[expert[s]];
  groups.offsets.assign(num_experts + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e) groups.offsets[e + 1] = groups.offsets[e] + load[e];
  groups.slots = torch::empty({num_slots}, torch::kInt64);
  groups.tokens = torch::empty({num_slots}, torch::kInt64);
  groups.position = torch::empty({num_slots}, torch::kInt64);
  int64_t* slots = groups.slots.data_ptr<int64_t>();
  int64_t* tokens = groups.tokens.data_ptr<int64_t>();
  int64_t* position = groups.position.data_ptr<int64_t>();
  std::vector<int64_t> next(groups.offsets.begin(), groups.offsets.end() - 1);
  for (int64_t s = 0; s < num_slots; ++s) {
    const int64_t at = next[expert[s]]++;
    slots[at] = s;
    tokens[at] = s / k;
    position[s] = at;
  }
  return groups;
}

}  // namespace

MoeBlockImpl::MoeBlockImpl(const ModelConfig& config, torch::Dtype dtype, NumericMode mode)
    : num_experts_(config.num_experts),
      top_k_(config.num_experts_per_tok),
      normalize_(config.norm_topk_prob) {
  TORCH_CHECK(num_experts_ > 0 && top_k_ >= 1 && top_k_ <= num_experts_,
              "MoE block needs 1 <= num_experts_per_tok <= num_experts");
  gate = register_module("gate", Linear(config.hidden_size, num_experts_, false, dtype, mode));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < num_experts_; ++e) {
    experts->push_back(Mlp(config.hidden_size, config.moe_intermediate_size, dtype, mode));
  }
}

torch::Tensor MoeBlockImpl::forward(const torch::Tensor& x, ForwardKind kind, const OpTap& tap) {
  const int64_t num_tokens = x.size(0);
  torch::Tensor logits = gate(x, kind);
  tap(Op::kRouterLogits, logits);
  const kernels::TopKRouting routing = ops::TopKRouting(logits, top_k_, normalize_);
  const ExpertGroups groups = GroupByExpert(routing.experts, num_experts_);
  if (tap.active()) tap(RoutingDecision{routing.experts, routing.weights.detach(), groups.load});

  // Each expert over its tokens, each row times its weight; then the rows back in slot order.
  const torch::Tensor weights = routing.weights.reshape({-1}).to(x.scalar_type());
  std::vector<torch::Tensor> products;
  for (int64_t e = 0; e < num_experts_; ++e) {
    const int64_t begin = groups.offsets[e], count = groups.offsets[e + 1] - begin;
    if (count == 0) continue;
    const torch::Tensor rows = x.index_select(0, groups.tokens.narrow(0, begin, count));
    const torch::Tensor y = experts[e]->as<MlpImpl>()->forward(rows, kind);
    products.push_back(y *
                       weights.index_select(0, groups.slots.narrow(0, begin, count)).unsqueeze(1));
  }
  if (products.empty()) return torch::zeros_like(x);  // no tokens
  const torch::Tensor by_slot =
      torch::cat(products, 0).index_select(0, groups.position).view({num_tokens, top_k_, -1});
  // sum_r w_r * expert_r(x), added in rank order: ((p_0 + p_1) + p_2) + ...
  torch::Tensor out = by_slot.select(1, 0);
  for (int64_t rank = 1; rank < top_k_; ++rank) out = out + by_slot.select(1, rank);
  out = out.contiguous();
  tap(Op::kMoe, out);
  return out;
}

}  // namespace lockstep
