// bench_gpu: the CUDA kernels (model/kernels/*_cuda.h) against cuBLAS (linear) or the device's
// copy bandwidth (the memory-bound row kernels), at M = 1, 8, 64, 512, 4096 rows, and the weight
// sync's NCCL broadcast (weight_sync/nccl_broadcast.h) against the device copy bandwidth. Prints a
// table; --json FILE writes every figure. Without a CUDA device it says so, writes
// {"available": false, ...} and exits 0.
//
// COMPILED ONLY so far: no GPU has run it. Shapes: a Qwen3-8B-like layer (hidden 4096,
// intermediate 12288, 32 query / 8 KV heads of 128, vocabulary 151936).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/gpu/gpu_bench_util.h"
#include "bench/gpu/nccl_sync_bench.h"
#include "model/kernels/argmax_cuda.h"
#include "model/kernels/attention_cuda.h"
#include "model/kernels/linear_cuda.h"
#include "model/kernels/log_softmax_cuda.h"
#include "model/kernels/rms_norm_cuda.h"
#include "model/kernels/rope_cuda.h"
#include "model/kernels/silu_mul_cuda.h"

namespace lockstep::bench_gpu {
namespace {

namespace k = ::lockstep::kernels::cuda;
using nlohmann::json;

constexpr int64_t kHidden = 4096;
constexpr int64_t kIntermediate = 12288;
constexpr int64_t kHeads = 32;
constexpr int64_t kKvHeads = 8;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kVocab = 151936;
constexpr int64_t kDecodeContext = 512;

void CheckKernel(const k::KernelStatus& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "bench_gpu: %s\n", status.message.c_str());
  std::exit(1);
}

void CheckCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "bench_gpu: %s: cuBLAS status %d\n", what, static_cast<int>(status));
  std::exit(1);
}

// `host` copied into new device memory.
std::unique_ptr<DeviceMemory> UploadInt64(const std::vector<int64_t>& host) {
  auto memory = std::make_unique<DeviceMemory>(host.size() * 8);
  CheckCuda(cudaMemcpy(memory->as<int64_t>(), host.data(), host.size() * 8,
                       cudaMemcpyHostToDevice),
            "cudaMemcpy");
  return memory;
}

// One case: our kernel's time next to the reference's, and the ratio (ours / reference).
json Record(const std::string& kernel, int64_t m, double ms, const std::string& reference,
            double reference_ms, double bytes_or_flops, const char* unit) {
  json record = {{"kernel", kernel}, {"m", m}, {"ms", ms}, {"reference", reference},
                 {"reference_ms", reference_ms}, {"ratio", ms / reference_ms}};
  record[unit] = bytes_or_flops / (ms * 1e-3) / 1e9;
  std::printf("%-18s M=%-5lld %10.4f ms   %-16s %10.4f ms   x%6.2f   %8.1f %s\n", kernel.c_str(),
              static_cast<long long>(m), ms, reference.c_str(), reference_ms, ms / reference_ms,
              record[unit].get<double>(), unit);
  return record;
}

// y[M, N] = x[M, K] W[N, K]^T: ours (fixed order, fp32 accumulate) vs cuBLAS (pedantic fp32, no
// TF32; bf16 inputs through cublasGemmEx with fp32 compute, cuBLAS's choice of algorithm).
void BenchLinear(cublasHandle_t cublas, cudaStream_t stream, int64_t m, json& out) {
  const int64_t n = kHidden, kk = kHidden;
  for (bool bf16 : {false, true}) {
    const size_t element = bf16 ? 2 : 4;
    DeviceMemory x(m * kk * element), w(n * kk * element), y(m * n * 4);
    k::LinearCudaProblem problem;
    problem.x = x.as<void>();
    problem.x_stride = kk;
    problem.rows = m;
    problem.weight = w.as<void>();
    problem.out_features = n;
    problem.in_features = kk;
    problem.y = y.as<float>();
    problem.y_stride = n;
    const k::InputType type = bf16 ? k::InputType::kBFloat16 : k::InputType::kFloat32;
    const double ours = TimeMs(stream, [&] { CheckKernel(k::LinearCuda(problem, type, stream)); });
    const float one = 1, zero = 0;
    // fp32: pedantic (no TF32, the same no-shortcut arithmetic class as ours); bf16: cuBLAS's
    // default (tensor cores, fp32 accumulate), the stock path a batch-invariant kernel competes with.
    CheckCublas(cublasSetMathMode(cublas, bf16 ? CUBLAS_DEFAULT_MATH : CUBLAS_PEDANTIC_MATH),
                "cublasSetMathMode");
    const double reference = TimeMs(stream, [&] {
      if (bf16) {
        CheckCublas(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, kk, &one, w.as<void>(),
                                 CUDA_R_16BF, kk, x.as<void>(), CUDA_R_16BF, kk, &zero,
                                 y.as<void>(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx");
      } else {
        CheckCublas(cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, kk, &one, w.as<float>(),
                                kk, x.as<float>(), kk, &zero, y.as<float>(), n),
                    "cublasSgemm");
      }
    });
    out.push_back(Record(bf16 ? "linear_bf16" : "linear_fp32", m, ours,
                         bf16 ? "cublasGemmEx" : "cublasSgemm", reference, 2.0 * m * n * kk,
                         "gflops"));
  }
}

// The memory-bound kernels, each against a device copy moving the same number of bytes.
void BenchRowKernels(cudaStream_t stream, int64_t m, json& out) {
  {
    DeviceMemory x(m * kHidden * 4), w(kHidden * 4), y(m * kHidden * 4);
    const double bytes = 2.0 * m * kHidden * 4;
    const double ours = TimeMs(stream, [&] {
      CheckKernel(k::RmsNormCuda(x.as<float>(), w.as<float>(), y.as<float>(), m, kHidden, 1e-6f,
                                 stream));
    });
    out.push_back(Record("rms_norm", m, ours, "device_copy", CopyMs(stream, bytes), bytes, "gbps"));
  }
  {
    DeviceMemory logits(m * kVocab * 4), result(m * kVocab * 4);
    const double bytes = 2.0 * m * kVocab * 4;
    const double ours = TimeMs(stream, [&] {
      CheckKernel(
          k::LogSoftmaxCuda(logits.as<float>(), result.as<float>(), m, kVocab, 1.0f, stream));
    });
    out.push_back(
        Record("log_softmax", m, ours, "device_copy", CopyMs(stream, bytes), bytes, "gbps"));
    DeviceMemory index(m * 8);
    const double read = 1.0 * m * kVocab * 4;
    const double argmax = TimeMs(stream, [&] {
      CheckKernel(k::ArgMaxCuda(logits.as<float>(), m, kVocab, index.as<int64_t>(), stream));
    });
    out.push_back(Record("argmax", m, argmax, "device_copy", CopyMs(stream, read), read, "gbps"));
  }
  {
    const int64_t count = m * kIntermediate;
    DeviceMemory gate(count * 4), up(count * 4), result(count * 4);
    const double bytes = 3.0 * count * 4;
    const double ours = TimeMs(stream, [&] {
      CheckKernel(
          k::SiluMulCuda(gate.as<float>(), up.as<float>(), result.as<float>(), count, stream));
    });
    out.push_back(Record("silu_mul", m, ours, "device_copy", CopyMs(stream, bytes), bytes, "gbps"));
  }
  {
    const int64_t elements = m * kHeads * kHeadDim;
    DeviceMemory x(elements * 4), result(elements * 4), cos(m * kHeadDim * 4),
        sin(m * kHeadDim * 4);
    std::vector<int64_t> positions(m);
    for (int64_t t = 0; t < m; ++t) positions[t] = t;
    const std::unique_ptr<DeviceMemory> device_positions = UploadInt64(positions);
    k::RopeCudaProblem problem;
    problem.x = x.as<float>();
    problem.cos = cos.as<float>();
    problem.sin = sin.as<float>();
    problem.positions = device_positions->as<int64_t>();
    problem.num_tokens = m;
    problem.num_heads = kHeads;
    problem.head_dim = kHeadDim;
    problem.max_positions = m;
    problem.out = result.as<float>();
    const double bytes = 2.0 * elements * 4;
    const double ours = TimeMs(stream, [&] { CheckKernel(k::RopeCuda(problem, stream)); });
    out.push_back(Record("rope", m, ours, "device_copy", CopyMs(stream, bytes), bytes, "gbps"));
  }
}

// Attention: decode (M sequences, one query each at position kDecodeContext - 1, distinct cache
// rows) against a copy of the K/V bytes it must read; prefill (one sequence of M tokens, the
// training / prefill shape) in GFLOP/s, with no reference kernel here.
void BenchAttention(cudaStream_t stream, int64_t m, json& out) {
  const int64_t row = kKvHeads * kHeadDim;
  for (bool decode : {true, false}) {
    const int64_t sequences = decode ? m : 1;
    const int64_t context = decode ? kDecodeContext : m;
    const int64_t tokens = m;
    std::vector<int64_t> cu_seqlens(sequences + 1), first(sequences), offsets(sequences),
        key_rows(sequences * context);
    for (int64_t s = 0; s <= sequences; ++s) cu_seqlens[s] = decode ? s : s * m;
    for (int64_t s = 0; s < sequences; ++s) {
      first[s] = decode ? context - 1 : 0;
      offsets[s] = s * context;
    }
    for (int64_t r = 0; r < sequences * context; ++r) key_rows[r] = r;
    auto d_cu = UploadInt64(cu_seqlens), d_first = UploadInt64(first),
         d_offsets = UploadInt64(offsets), d_rows = UploadInt64(key_rows);
    DeviceMemory q(tokens * kHeads * kHeadDim * 4), result(tokens * kHeads * kHeadDim * 4),
        keys(sequences * context * row * 4), values(sequences * context * row * 4);
    k::AttentionCudaProblem problem;
    problem.q = q.as<float>();
    problem.num_tokens = tokens;
    problem.num_sequences = sequences;
    problem.cu_seqlens = d_cu->as<int64_t>();
    problem.first_positions = d_first->as<int64_t>();
    problem.key_rows = d_rows->as<int64_t>();
    problem.key_row_offsets = d_offsets->as<int64_t>();
    problem.keys = keys.as<float>();
    problem.values = values.as<float>();
    problem.kv_row_stride = row;
    problem.num_heads = kHeads;
    problem.num_kv_heads = kKvHeads;
    problem.head_dim = kHeadDim;
    problem.scale = 1.0f / 11.3137085f;
    problem.out = result.as<float>();
    const double ours =
        TimeMs(stream, [&] { CheckKernel(k::CausalAttentionCuda(problem, stream)); });
    if (decode) {
      const double bytes = 2.0 * sequences * context * row * 4;
      out.push_back(Record("attention_decode", m, ours, "device_copy", CopyMs(stream, bytes),
                           bytes, "gbps"));
    } else {
      // q·k and p·v over the causal triangle: 2 matmuls x 2 flops x (M (M + 1) / 2) x d x heads.
      const double flops = 4.0 * (m * (m + 1) / 2.0) * kHeadDim * kHeads;
      json record = {{"kernel", "attention_prefill"}, {"m", m}, {"ms", ours},
                     {"gflops", flops / (ours * 1e-3) / 1e9}, {"reference", nullptr}};
      std::printf("%-18s M=%-5lld %10.4f ms   (no reference kernel)   %8.1f gflops\n",
                  "attention_prefill", static_cast<long long>(m), ours,
                  record["gflops"].get<double>());
      out.push_back(record);
    }
  }
}

json DeviceJson(int device) {
  cudaDeviceProp properties;
  CheckCuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return {{"name", properties.name},
          {"compute_capability", std::to_string(properties.major) + "." +
                                     std::to_string(properties.minor)},
          {"multiprocessors", properties.multiProcessorCount},
          {"memory_gib", properties.totalGlobalMem / double(1 << 30)}};
}

void WriteJson(const std::string& path, const json& result) {
  if (path.empty()) return;
  std::ofstream file(path);
  file << result.dump(2) << "\n";
  if (!file) {
    std::fprintf(stderr, "bench_gpu: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"bench_gpu: CUDA kernels vs cuBLAS / copy bandwidth; NCCL sync vs copy bandwidth"};
  std::string json_path;
  std::vector<int64_t> m_values = {1, 8, 64, 512, 4096};
  int64_t sync_mib = 256;
  app.add_option("--json", json_path, "write the figures as JSON here");
  app.add_option("--m", m_values, "row counts (default 1 8 64 512 4096)");
  app.add_option("--sync-mib", sync_mib, "bytes per NCCL broadcast, MiB (default 256)");
  CLI11_PARSE(app, argc, argv);

  json result = {{"benchmark", "bench_gpu"}};
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    const std::string reason =
        error != cudaSuccess ? std::string(cudaGetErrorName(error)) + ": " +
                                   cudaGetErrorString(error)
                             : std::string("no CUDA device visible");
    std::printf("bench_gpu: no CUDA device (%s); nothing measured\n", reason.c_str());
    result["available"] = false;
    result["reason"] = reason;
    WriteJson(json_path, result);
    return 0;
  }
  result["available"] = true;
  result["device"] = DeviceJson(0);
  result["visible_devices"] = count;
  std::printf("bench_gpu on %s (%d visible)\n", result["device"]["name"].get<std::string>().c_str(),
              count);
  CheckCuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream;
  CheckCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cublasHandle_t cublas;
  CheckCublas(cublasCreate(&cublas), "cublasCreate");
  CheckCublas(cublasSetStream(cublas, stream), "cublasSetStream");

  json kernels = json::array();
  for (int64_t m : m_values) {
    BenchLinear(cublas, stream, m, kernels);
    BenchRowKernels(stream, m, kernels);
    BenchAttention(stream, m, kernels);
  }
  result["kernels"] = kernels;
  result["sync"] = BenchSync(stream, count, sync_mib << 20);
  cublasDestroy(cublas);
  cudaStreamDestroy(stream);
  WriteJson(json_path, result);
  return 0;
}

}  // namespace
}  // namespace lockstep::bench_gpu

int main(int argc, char** argv) { return lockstep::bench_gpu::Main(argc, argv); }
