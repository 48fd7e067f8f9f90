// The small kernels the CUDA model-op binders (runtime/cuda_model_ops.cpp) need around the
// src/cuda/ kernels: 16-bit elementwise core ops, fp32 → 16-bit conversion of weight-gradient
// accumulators, RoPE through cos/sin tables (the graph's rope_cos_sin / rope contract), packed
// document ids → cu_seqlens, a plain attention for head dims the flash kernels do not cover
// (the tiny test models), bias gradients, scalar products and LM-head argmax hits.
// Plain host launchers on a stream, checked after every launch; no graph headers. E, the graph's
// 16-bit element type, is bf16 (__nv_bfloat16) or fp16 (__half); every result is computed in
// fp32 and rounded to nearest even once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::runtime::cuda_kernels {

using bf16 = __nv_bfloat16;

template <typename E>
void add_16bit(const E* a, const E* b, E* out, int64_t count, cudaStream_t stream);
// out += gradient (fp32 sum, rounded once).
template <typename E>
void accumulate_16bit(const E* gradient, E* out, int64_t count, cudaStream_t stream);
template <typename E>
void fill_16bit(float value, E* out, int64_t count, cudaStream_t stream);
template <typename E>
void convert_from_f32(const float* in, E* out, int64_t count, cudaStream_t stream);

// cos/sin [tokens, half] = cos/sin(float(position) · inv_freq[i]) · scaling, as ops/rope.h (fp32
// angle, then rounded to the table's dtype). T = float, bf16 or fp16.
template <typename T>
void rope_tables(T* cos, T* sin, const int32_t* position_ids, const float* inv_freq, int64_t tokens, int half,
                 float scaling, cudaStream_t stream);

// x [tokens, heads, head_dim] rotated by the tables' angles (sign +1) or their negation (sign −1,
// the backward); channels past 2·half pass unchanged. Tables in T (float or E).
template <typename E, typename T>
void rope_apply(E* out, const E* x, const T* cos, const T* sin, int64_t tokens, int heads, int head_dim,
                int half, float sign, cudaStream_t stream);

// cu_seqlens [tokens + 1] from per-token document ids [rows, sequence] (null: one document per
// row): a document starts at every row start, wherever the id changes and at every padding
// token (id −1). Entries past the last
// document repeat `tokens`, so kernels may be told `tokens` documents (an upper bound known on
// the host) and their binary searches still land on the real ones. One block.
void cu_seqlens_from_documents(int32_t* cu_seqlens, const int32_t* document_ids, int64_t rows, int64_t sequence,
                               cudaStream_t stream);

// Plain causal GQA attention with packed documents and a sliding window, one thread per
// (query or key, head), fp32 math, E in/out: the fallback for head_dim ∉ {32, 64, 128}
// (≤ 256). logsumexp fp32 [q_heads, tokens] like the flash kernels. Deterministic.
struct PlainAttentionShape {
  int64_t tokens = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  int window = 0;
  float scale = 0.0f;
};
template <typename E>
void plain_attention_forward(E* out, float* logsumexp, const E* q, const E* k, const E* v,
                             const int32_t* cu_seqlens, const PlainAttentionShape& shape, cudaStream_t stream);
template <typename E>
void plain_attention_backward(E* dq, E* dk, E* dv, const E* dout, const E* q, const E* k,
                              const E* v, const E* out, const float* logsumexp, const int32_t* cu_seqlens,
                              const PlainAttentionShape& shape, cudaStream_t stream);

// dbias[c] = Σ_rows dout[r, c] (fp32 sum in row order, one thread per column; deterministic).
template <typename E>
void bias_gradient(E* dbias, const E* dout, int64_t rows, int64_t columns, cudaStream_t stream);

// out[0] = a[0] · b[0].
void scalar_product(const float* a, const float* b, float* out, cudaStream_t stream);

// Per row of logits [rows, vocab] (E): hit when the first index of the row's maximum equals
// the label (labels outside [0, vocab), e.g. −100, are skipped). Adds the hits to *hits.
template <typename E>
void argmax_hits(int32_t* hits, const E* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                 cudaStream_t stream);
// out[0] = float(*count).
void count_to_float(const int32_t* count, float* out, cudaStream_t stream);

}  // namespace surogate::runtime::cuda_kernels
