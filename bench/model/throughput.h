// Throughput measurements shared by the benchmark programs: a timing loop and whole-model
// forward (training path) and decode (paged path) tokens per second.
#ifndef LOCKSTEP_BENCH_MODEL_THROUGHPUT_H_
#define LOCKSTEP_BENCH_MODEL_THROUGHPUT_H_

#include <functional>
#include <string>

#include "bench/model/op_timer.h"
#include "model/transformer.h"

namespace lockstep::bench {

// Runs `body` once to warm up, then until `seconds` have passed (at least twice); returns the
// fastest call's seconds.
double TimePerCall(const std::function<void()>& body, double seconds);

// The CPU's model name as /proc/cpuinfo gives it ("unknown" where it does not): every figure a
// bench prints is a figure of this machine.
std::string CpuModelName();

// The BLAS that stock LibTorch runs on, for the same record: "OpenBLAS <core>" (the kernels it
// picked), with the OPENBLAS_CORETYPE override where the environment sets one, or "not
// OpenBLAS". An environment can force a narrower core than the CPU's: OPENBLAS_CORETYPE=Haswell
// made OpenBLAS 0.3.21 run its AVX2 kernels on an AVX-512 Zen 5, which picks Cooperlake alone.
std::string StockBlasName();

// GFLOP/s of a [512 x 1024] x [1024 x 1024] LibTorch matmul (the BLAS reference figure).
double BlasGflops(double seconds);

// Training-path forward plus target log-probs over batch_size sequences of seq_len tokens.
double ForwardTokensPerSecond(Transformer& model, int64_t batch_size, int64_t seq_len,
                              double seconds);

// Paged decode: batch_size sequences prefilled to `context` tokens, then `steps` steps of one
// token per sequence (logits of the new rows and argmax included). Tokens per second. With a
// `timer`, each timed step's ops are charged to it (the LM head's logits as Op::kLmHead; the
// argmax and the next step's set-up go to the step's first op, the embedding).
double DecodeTokensPerSecond(Transformer& model, int64_t batch_size, int64_t context,
                             int64_t steps, OpTimer* timer = nullptr);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_MODEL_THROUGHPUT_H_
