#include "trainer/losses.h"

namespace lockstep::trainer {
namespace {

// Sequence index of each of the T tokens: [T] int64.
torch::Tensor SequenceIndex(const std::vector<int64_t>& cu_seqlens) {
  const int64_t num_tokens = cu_seqlens.empty() ? 0 : cu_seqlens.back();
  torch::Tensor index = torch::empty({num_tokens}, torch::kInt64);
  int64_t* out = index.data_ptr<int64_t>();
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    for (int64_t t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) out[t] = static_cast<int64_t>(s);
  }
  return index;
}

int64_t NumSequences(const std::vector<int64_t>& cu_seqlens) {
  return cu_seqlens.empty() ? 0 : static_cast<int64_t>(cu_seqlens.size()) - 1;
}

}  // namespace

torch::Tensor AggregationWeights(Aggregation aggregation, const torch::Tensor& mask,
                                 const std::vector<int64_t>& cu_seqlens, double global_tokens,
                                 double global_sequences, double constant_normalizer) {
  torch::Tensor m = mask.to(torch::kFloat32);
  switch (aggregation) {
    case Aggregation::kTokenMean:
      // w_t = 1 / N
      return m / global_tokens;
    case Aggregation::kSeqMeanTokenMean: {
      // w_t = 1 / (n_s * S), n_s = loss tokens of the sequence of t
      torch::Tensor index = SequenceIndex(cu_seqlens);
      torch::Tensor counts =
          torch::zeros({NumSequences(cu_seqlens)}, torch::kFloat32).index_add_(0, index, m);
      return m / (counts.index_select(0, index).clamp_min(1.0) * global_sequences);
    }
    case Aggregation::kConstant:
      // w_t = 1 / (C * S)
      return m / (constant_normalizer * global_sequences);
  }
  return m;
}

PolicyLossOptions PolicyLossOptions::From(const TrainerOptions& options) {
  PolicyLossOptions o;
  o.kind = options.loss;
  o.clip_eps_low = options.clip_eps_low;
  o.clip_eps_high = options.clip_eps_high;
  o.log_ratio_clamp = options.log_ratio_clamp;
  o.tis_cap = options.tis_cap;
  o.kl_coef = options.kl_coef;
  return o;
}

PolicyLossResult PolicyLoss(const PolicyLossInput& input, const PolicyLossOptions& options) {
  const double c = options.log_ratio_clamp;
  const torch::Tensor& mask = input.mask;
  const torch::Tensor zeros = torch::zeros_like(input.logprobs);
  // Masked tokens see behaviour = trainer (detached): finite, ratio 1, zero weight.
  const torch::Tensor logp = torch::where(mask, input.logprobs, zeros);
  const torch::Tensor logp_detached = logp.detach();
  const torch::Tensor behaviour = torch::where(mask, input.behaviour_logprobs, logp_detached);
  const torch::Tensor maskf = mask.to(torch::kFloat32);

  PolicyLossResult result;
  // Token ratio pi / pi_b = exp(clamp(logp - logp_b, -c, c)), for metrics and the TIS weight.
  const torch::Tensor token_log_ratio = (logp_detached - behaviour).clamp(-c, c);
  result.ratio = token_log_ratio.exp();

  // d_t: against the behaviour policy, or against sg(logp) under TIS.
  const bool tis = options.tis_cap > 0;
  torch::Tensor d = tis ? logp - logp_detached : (logp - behaviour).clamp(-c, c);
  if (options.kind == LossKind::kGspo) {
    // log s_i = (1 / n_i) sum_{t in i, mask} d_t ;  every token of i carries log s_i
    torch::Tensor index = SequenceIndex(input.cu_seqlens);
    const int64_t num_sequences = NumSequences(input.cu_seqlens);
    torch::Tensor sums = torch::zeros({num_sequences}, d.options()).index_add(0, index, d * maskf);
    torch::Tensor counts =
        torch::zeros({num_sequences}, torch::kFloat32).index_add_(0, index, maskf).clamp_min(1.0);
    d = (sums / counts).index_select(0, index).clamp(-c, c);
  }
  const torch::Tensor ratio = d.exp();
  const torch::Tensor& advantage = input.advantages;
  // l_t = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)
  const torch::Tensor unclipped = ratio * advantage;
  const torch::Tensor clipped =
      ratio.clamp(1.0 - options.clip_eps_low, 1.0 + options.clip_eps_high) * advantage;
  torch::Tensor token_loss = -torch::min(unclipped, clipped);
  result.clipped = (clipped.detach() < unclipped.detach()) & mask;
  if (tis) {
    // l_t *= min(exp(clamp(sg(logp) - logp_b)), cap)
    token_loss = token_loss * result.ratio.clamp_max(options.tis_cap);
  }
  if (options.kl_coef > 0) {
    // e_t = clamp(logp_ref - logp) ; k3 = exp(e) - 1 - e
    const torch::Tensor reference = torch::where(mask, input.reference_logprobs, logp_detached);
    const torch::Tensor e = (reference - logp).clamp(-c, c);
    const torch::Tensor k3 = e.exp() - 1.0 - e;
    token_loss = token_loss + options.kl_coef * k3;
    result.kl = k3.detach() * maskf;
  } else {
    result.kl = zeros;
  }
  // loss = sum_t w_t l_t
  result.loss = (input.weights * token_loss).sum();
  return result;
}

torch::Tensor SftLoss(const torch::Tensor& logprobs, const torch::Tensor& weights) {
  // loss = -sum_t w_t logp_t  (masked tokens: w_t = 0; their log-probs are finite)
  return -(weights * logprobs).sum();
}

}  // namespace lockstep::trainer
