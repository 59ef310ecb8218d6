#include "bench/model/throughput.h"

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "model/ops.h"

// Weak: resolved where LibTorch runs on OpenBLAS (Debian's), null under another BLAS.
extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace lockstep::bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

double TimePerCall(const std::function<void()>& body, double seconds) {
  body();  // warm-up
  double best = 1e30, total = 0;
  int runs = 0;
  while (total < seconds || runs < 2) {
    const auto start = Clock::now();
    body();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, elapsed);
    total += elapsed;
    ++runs;
  }
  return best;
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    return colon == std::string::npos ? line : line.substr(colon + 2);
  }
  return "unknown";
}

std::string StockBlasName() {
  if (openblas_get_corename == nullptr) return "not OpenBLAS";
  std::string name = std::string("OpenBLAS ") + openblas_get_corename();
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced != nullptr) {
    name += std::string(" (OPENBLAS_CORETYPE=") + forced + ")";
  }
  return name;
}

double BlasGflops(double seconds) {
  torch::Tensor a = torch::randn({512, 1024});
  torch::Tensor b = torch::randn({1024, 1024});
  const double per_call = TimePerCall([&] { torch::matmul(a, b); }, seconds);
  return 2.0 * 512 * 1024 * 1024 / per_call / 1e9;
}

double ForwardTokensPerSecond(Transformer& model, int64_t batch_size, int64_t seq_len,
                              double seconds) {
  torch::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> sequences(batch_size);
  for (int64_t s = 0; s < batch_size; ++s) {
    for (int64_t t = 0; t < seq_len; ++t) {
      sequences[s].push_back((s * 7919 + t * 104729) % model.config().vocab_size);
    }
  }
  PackedBatch batch = *PackSequences(sequences);
  torch::Tensor targets = batch.token_ids.roll(-1);
  const double per_call = TimePerCall(
      [&] {
        torch::Tensor hidden = *model.Hidden(batch, TrainingAttention{});
        model.TargetLogProbs(hidden, targets);
      },
      seconds);
  return batch_size * seq_len / per_call;
}

double DecodeTokensPerSecond(Transformer& model, int64_t batch_size, int64_t context,
                             int64_t steps, OpTimer* timer) {
  torch::NoGradGuard no_grad;
  const int64_t block_size = 16;
  const int64_t blocks_per_sequence = (context + steps + block_size - 1) / block_size;
  PagedKvCache cache = AllocatePagedKvCache(model.config(), batch_size * blocks_per_sequence,
                                            block_size, model.options().compute_dtype);
  PagedAttention paged{&cache, ContiguousBlockTables(batch_size, blocks_per_sequence)};
  std::vector<std::vector<int64_t>> prompts(batch_size);
  for (int64_t s = 0; s < batch_size; ++s) {
    for (int64_t t = 0; t < context; ++t) prompts[s].push_back((s + 3 * t) % 256);
  }
  std::vector<int64_t> starts(batch_size, 0);
  (void)*model.Hidden(*PackContinuations(prompts, starts), paged);  // prefill, not timed
  std::vector<std::vector<int64_t>> step_tokens(batch_size, std::vector<int64_t>{1});
  std::fill(starts.begin(), starts.end(), context);
  const auto start = Clock::now();
  if (timer != nullptr) timer->Mark();
  for (int64_t step = 0; step < steps; ++step) {
    PackedBatch batch = *PackContinuations(step_tokens, starts);
    torch::Tensor hidden = *model.Hidden(batch, paged, timer);
    torch::Tensor logits = model.Logits(Transformer::LastTokenRows(hidden, batch), paged.kind);
    if (timer != nullptr) timer->OnOutput(-1, Op::kLmHead, logits, nullptr);
    torch::Tensor next = ops::ArgMaxRows(logits);  // as the engine's greedy sampler
    for (int64_t s = 0; s < batch_size; ++s) {
      step_tokens[s][0] = next[s].item<int64_t>();
      ++starts[s];
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return batch_size * steps / elapsed;
}

}  // namespace lockstep::bench
