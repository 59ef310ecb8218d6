// The forwards of the fixed-order ops on CUDA tensors: what linear_ops.cc, elementwise_ops.cc,
// rope_ops.cc and attention_ops.cc call when their input is a CUDA tensor. Each checks devices
// and dtypes the CPU op does not need to, makes the input's device current, and runs the CUDA
// launcher (*_cuda.h) on LibTorch's current stream there (torch_cuda_stream.h). Forward only:
// the callers' autograd Functions keep their backward (stock LibTorch ops, which run on CUDA
// too). Same parity contract as the CPU kernels, with GPU bits: a row's result never depends on
// the other rows, but GPU and CPU bits are not meant to agree.
//
// Defined by linear_ops_cuda.cc, elementwise_ops_cuda.cc, rope_ops_cuda.cc and
// attention_ops_cuda.cc when nvcc is found (LOCKSTEP_HAVE_CUDA); otherwise by ops_cuda_stub.cc,
// where each throws a c10::Error that names the rebuild needed. No CUDA include here.
//
// COMPILED ONLY: no GPU has run this glue yet.
#ifndef LOCKSTEP_MODEL_KERNELS_OPS_CUDA_H_
#define LOCKSTEP_MODEL_KERNELS_OPS_CUDA_H_

#include <torch/torch.h>

#include <vector>

namespace lockstep::kernels {

// y = x W^T (+ b): x [M, K] and weight [N, K] both float32 or both bfloat16 (widened exactly),
// bias [N] float32 or undefined; returns [M, N] float32 (linear_cuda.h).
torch::Tensor LinearOnCuda(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias);

// RMSNorm over the last dimension (rms_norm_cuda.h). x, weight: float32.
torch::Tensor RmsNormOnCuda(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// silu(gate) * up (silu_mul_cuda.h). gate, up: float32, same shape.
torch::Tensor SiluMulOnCuda(const torch::Tensor& gate, const torch::Tensor& up);

// log_softmax(logits / T)[i, targets[i]] (log_softmax_cuda.h): logits [rows, vocab] float32,
// targets [rows] int64 on any device. Returns [rows] float32; a target outside [0, vocab) gives
// NaN (the CPU op reads out of bounds).
torch::Tensor TargetLogProbsOnCuda(const torch::Tensor& logits, const torch::Tensor& targets,
                                   double temperature);

// log_softmax(logits / T) over the last dimension, float32 (log_softmax_cuda.h).
torch::Tensor LogSoftmaxOnCuda(const torch::Tensor& logits, double temperature);

// First index of the largest value of each row of x [rows, cols] float32, int64 [rows] on x's
// device (argmax_cuda.h).
torch::Tensor ArgMaxRowsOnCuda(const torch::Tensor& x);

// RotateHalfFromTable (rope_ops.h) with x on CUDA (rope_cuda.h). The tables may stay on the
// host: then only the rows `positions` names are uploaded (the same values, so the same bits),
// and a position outside the table is a c10::Error as on the CPU; tables on x's device are read
// in place, and there a position outside writes NaN.
torch::Tensor RotateHalfFromTableOnCuda(const torch::Tensor& x, const torch::Tensor& cos,
                                        const torch::Tensor& sin, const torch::Tensor& positions);

// FixedOrderAttentionPacked (attention_ops.h) with q, keys, values on one CUDA device
// (attention_cuda.h): one launch for every sequence. key_rows may be host or device int64
// tensors; they and the sequence boundaries are uploaded once per call. FixedOrderAttentionPacked,
// its caller, has checked the dtypes and that key_rows and first_positions fit cu_seqlens.
torch::Tensor AttentionPackedOnCuda(const torch::Tensor& q, const torch::Tensor& keys,
                                    const torch::Tensor& values,
                                    const std::vector<torch::Tensor>& key_rows,
                                    const std::vector<int64_t>& first_positions,
                                    const std::vector<int64_t>& cu_seqlens);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_OPS_CUDA_H_
