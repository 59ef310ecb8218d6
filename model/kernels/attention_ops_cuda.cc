// AttentionPackedOnCuda (ops_cuda.h): the fixed-order causal attention on CUDA tensors
// (attention_cuda.h), for training (one sequence over its own rows), prefill and decode (the
// flat paged cache) alike: one launch per call, every (query, head) item in one fixed key order.
#include <algorithm>
#include <cmath>

#include "model/kernels/attention_cuda.h"
#include "model/kernels/ops_cuda.h"
#include "model/kernels/torch_cuda_stream.h"

namespace lockstep::kernels {
namespace {

// Every sequence's key rows, one after the other, on `device`: one upload when all are on the
// host (the generator's block tables), else each moved there first.
torch::Tensor ConcatenatedKeyRows(const std::vector<torch::Tensor>& key_rows,
                                  const torch::Device& device) {
  const bool all_host = std::all_of(key_rows.begin(), key_rows.end(),
                                    [](const torch::Tensor& rows) { return rows.is_cpu(); });
  if (all_host) return torch::cat(key_rows).to(device);
  std::vector<torch::Tensor> on_device;
  on_device.reserve(key_rows.size());
  for (const torch::Tensor& rows : key_rows) on_device.push_back(rows.to(device));
  return torch::cat(on_device);
}

}  // namespace

torch::Tensor AttentionPackedOnCuda(const torch::Tensor& q, const torch::Tensor& keys,
                                    const torch::Tensor& values,
                                    const std::vector<torch::Tensor>& key_rows,
                                    const std::vector<int64_t>& first_positions,
                                    const std::vector<int64_t>& cu_seqlens) {
  TORCH_CHECK(q.dim() == 3 && keys.dim() == 3 && values.sizes() == keys.sizes() &&
                  keys.size(2) == q.size(2),
              "attention on CUDA: q must be [tokens, heads, head_dim] and keys, values "
              "[rows, kv_heads, head_dim] of one shape");
  TORCH_CHECK(keys.device() == q.device() && values.device() == q.device(),
              "attention on CUDA: q (", q.device(), "), keys (", keys.device(), ") and values (",
              values.device(), ") must be on one device");
  const size_t num_sequences = cu_seqlens.size() - 1;
  // Device metadata, one upload: cu_seqlens | first_positions | key_row_offsets.
  std::vector<int64_t> metadata(cu_seqlens.begin(), cu_seqlens.end());
  metadata.insert(metadata.end(), first_positions.begin(), first_positions.end());
  int64_t key_row_offset = 0;
  for (size_t s = 0; s < num_sequences; ++s) {
    metadata.push_back(key_row_offset);
    key_row_offset += key_rows[s].size(0);
  }
  const CudaLaunchScope launch(q);
  const torch::Tensor qc = q.contiguous();
  const torch::Tensor kc = keys.contiguous();
  const torch::Tensor vc = values.contiguous();
  torch::Tensor out = torch::empty_like(qc);
  if (out.numel() == 0) return out;
  const torch::Tensor device_metadata =
      torch::from_blob(metadata.data(), {static_cast<int64_t>(metadata.size())}, torch::kInt64)
          .to(q.device());  // a blocking copy: `metadata` may go after it
  const torch::Tensor device_key_rows = ConcatenatedKeyRows(key_rows, q.device()).contiguous();
  const int64_t* meta = device_metadata.data_ptr<int64_t>();
  cuda::AttentionCudaProblem problem;
  problem.q = qc.data_ptr<float>();
  problem.num_tokens = qc.size(0);
  problem.num_sequences = static_cast<int64_t>(num_sequences);
  problem.cu_seqlens = meta;
  problem.first_positions = meta + num_sequences + 1;
  problem.key_row_offsets = meta + 2 * num_sequences + 1;
  problem.key_rows = device_key_rows.data_ptr<int64_t>();
  problem.keys = kc.data_ptr<float>();
  problem.values = vc.data_ptr<float>();
  problem.kv_row_stride = kc.size(1) * kc.size(2);
  problem.num_heads = qc.size(1);
  problem.num_kv_heads = kc.size(1);
  problem.head_dim = qc.size(2);
  problem.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(qc.size(2))));
  problem.out = out.data_ptr<float>();
  CheckKernelStatus(cuda::CausalAttentionCuda(problem, launch.stream()));
  return out;
}

}  // namespace lockstep::kernels
