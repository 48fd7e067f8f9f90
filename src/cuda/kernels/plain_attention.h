// cu_seqlens from packed document ids (what every attention kernel reads), and a plain causal
// GQA attention for head dims the flash kernels (attention.h) do not cover: the tiny test models.
// Plain host launchers on a stream; E is bf16 or fp16, fp32 math.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// cu_seqlens [tokens + 1] from per-token document ids [rows, sequence] (null: one document per
// row): a document starts at every row start, wherever the id changes and at every padding
// token (id −1). Entries past the last
// document repeat `tokens`, so kernels may be told `tokens` documents (an upper bound known on
// the host) and their binary searches still land on the real ones. One block.
void cu_seqlens_from_documents(int32_t* cu_seqlens, const int32_t* document_ids, int64_t rows, int64_t sequence,
                               cudaStream_t stream);

// Plain causal GQA attention with packed documents and a sliding window, or bidirectional within
// each document (causal = false, no window), one thread per (query or key, head), fp32 math, E
// in/out: the fallback for head_dim ∉ {32, 64, 128} (≤ 256). logsumexp fp32 [q_heads, tokens]
// like the flash kernels. Deterministic.
struct PlainAttentionShape {
  int64_t tokens = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  int window = 0;
  float scale = 0.0f;
  bool causal = true;
};
template <typename E>
void plain_attention_forward(E* out, float* logsumexp, const E* q, const E* k, const E* v,
                             const int32_t* cu_seqlens, const PlainAttentionShape& shape, cudaStream_t stream);
template <typename E>
void plain_attention_backward(E* dq, E* dk, E* dv, const E* dout, const E* q, const E* k,
                              const E* v, const E* out, const float* logsumexp, const int32_t* cu_seqlens,
                              const PlainAttentionShape& shape, cudaStream_t stream);

}  // namespace surogate::cuda
