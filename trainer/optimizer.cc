#include "trainer/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace lockstep::trainer {

AdamW::AdamW(std::vector<std::pair<std::string, torch::Tensor>> parameters, AdamWOptions options)
    : options_(options), step_tensor_(torch::zeros({1}, torch::kInt64)) {
  torch::NoGradGuard no_grad;
  for (auto& [name, param] : parameters) {
    slots_.push_back({name, param, torch::zeros_like(param, torch::MemoryFormat::Contiguous),
                      torch::zeros_like(param, torch::MemoryFormat::Contiguous)});
  }
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_count_;
  step_tensor_.data_ptr<int64_t>()[0] = step_count_;
  const double t = static_cast<double>(step_count_);
  const double bias1 = 1.0 - std::pow(options_.beta1, t);
  const double bias2 = 1.0 - std::pow(options_.beta2, t);
  for (Slot& slot : slots_) {
    const torch::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    if (options_.weight_decay != 0 && slot.param.dim() >= 2) {
      // p <- p * (1 - lr * wd)
      slot.param.mul_(1.0 - lr * options_.weight_decay);
    }
    // m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
    slot.exp_avg.mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    slot.exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    // p <- p - (lr / bias1) * m / (sqrt(v) / sqrt(bias2) + eps)
    torch::Tensor denom = (slot.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(options_.eps);
    slot.param.addcdiv_(slot.exp_avg, denom, -lr / bias1);
  }
}

TensorMap AdamW::StateDict() const {
  TensorMap state;
  for (const Slot& slot : slots_) {
    state["exp_avg." + slot.name] = slot.exp_avg;
    state["exp_avg_sq." + slot.name] = slot.exp_avg_sq;
  }
  state["step"] = step_tensor_;
  return state;
}

absl::Status AdamW::LoadStateDict(const TensorMap& state) {
  auto step_it = state.find("step");
  if (step_it == state.end() || step_it->second.numel() != 1 ||
      step_it->second.scalar_type() != torch::kInt64) {
    return absl::InvalidArgumentError("optimizer state: missing or malformed 'step' (int64 [1])");
  }
  size_t expected = 1;
  for (const Slot& slot : slots_) {
    for (const std::string& key : {"exp_avg." + slot.name, "exp_avg_sq." + slot.name}) {
      auto it = state.find(key);
      if (it == state.end()) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer state: missing '", key, "'"));
      }
      if (!it->second.sizes().equals(slot.param.sizes()) ||
          it->second.scalar_type() != slot.param.scalar_type()) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer state: '", key, "' has the wrong shape or dtype"));
      }
      ++expected;
    }
  }
  if (state.size() != expected) {
    for (const auto& [key, tensor] : state) {
      bool known = key == "step";
      for (const Slot& slot : slots_) {
        known = known || key == "exp_avg." + slot.name || key == "exp_avg_sq." + slot.name;
      }
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer state: unexpected entry '", key, "'"));
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (Slot& slot : slots_) {
    slot.exp_avg.copy_(state.at("exp_avg." + slot.name));
    slot.exp_avg_sq.copy_(state.at("exp_avg_sq." + slot.name));
  }
  step_count_ = step_it->second.item<int64_t>();
  step_tensor_.data_ptr<int64_t>()[0] = step_count_;
  return absl::OkStatus();
}

double ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  // norm = sqrt( sum_p sum_i g_{p,i}^2 )
  double squares = 0;
  for (const torch::Tensor& p : parameters) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    squares += g.to(torch::kFloat64).pow(2).sum().item<double>();
  }
  const double norm = std::sqrt(squares);
  // g <- g * max_norm / (norm + 1e-6)   when norm > max_norm
  if (max_norm > 0 && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const torch::Tensor& p : parameters) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

}  // namespace lockstep::trainer
