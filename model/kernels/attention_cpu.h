// Batch-invariant causal attention (fp32), one per-query routine serving training (contiguous
// keys), paged prefill and paged decode (keys in cache slots).
//
// For query i of a sequence (position p_i = first_position + i) and head h (kv head
// g = h / (num_heads / num_kv_heads)):
//   s_j = (q · k_j) * scale,  j = 0 .. p_i       (dot over head_dim in one fixed order)
//   m = max_j s_j;  l = sum_j exp(s_j - m);  out = sum_j exp(s_j - m) * v_j / l
// The sums run in key order j = 0, 1, ... (or fixed-size key blocks combined in a fixed order):
// the result depends only on the keys, never on how many queries are computed together, which
// (query, head) items a call gets, or the thread count.
// Raw pointers, no LibTorch include.
#ifndef LOCKSTEP_MODEL_KERNELS_ATTENTION_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_ATTENTION_CPU_H_

#include <cstdint>

namespace lockstep::kernels {

struct AttentionProblem {
  const float* q = nullptr;        // [num_queries, num_heads, head_dim], contiguous
  int64_t num_queries = 0;
  int64_t first_position = 0;     // position of query 0; query i sees keys 0 .. first_position+i
  // Key/value rows: row r starts at keys + r * kv_row_stride and holds [num_kv_heads, head_dim].
  // key_rows[j] is the row holding position j, for j = 0 .. first_position + num_queries - 1.
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t kv_row_stride = 0;       // floats between rows (usually num_kv_heads * head_dim)
  const int64_t* key_rows = nullptr;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 0;                 // usually head_dim^-0.5
  float* out = nullptr;            // [num_queries, num_heads, head_dim], contiguous
};

// Computes (query, head) items [item_begin, item_end), item = query * num_heads + head.
void CausalAttentionItems(const AttentionProblem& problem, int64_t item_begin, int64_t item_end);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ATTENTION_CPU_H_
