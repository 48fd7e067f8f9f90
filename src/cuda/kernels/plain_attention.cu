// cu_seqlens from packed document ids, and the plain (non-flash) attention; see plain_attention.h.
#include "cuda/kernels/plain_attention.h"

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/document_search.cuh"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

constexpr int kMaxPlainHeadDim = 256;

using kernels::from_float;
using kernels::to_float;

// ---- cu_seqlens ----

constexpr int kScanThreads = 1024;

// Every padding token (id −1) is a document of its own, as ops/attention.h defines: a run of
// padding attends in time linear in its length, not its square.
__device__ __forceinline__ bool starts_document(const int32_t* documents, int64_t sequence, int64_t t) {
  if (t % sequence == 0) return true;
  return documents != nullptr && (documents[t] != documents[t - 1] || documents[t] < 0);
}

__global__ void cu_seqlens_kernel(int32_t* cu_seqlens, const int32_t* documents, int64_t tokens, int64_t sequence) {
  __shared__ int counts[kScanThreads];
  const int64_t per_thread = (tokens + kScanThreads - 1) / kScanThreads;
  const int64_t begin = threadIdx.x * per_thread, end = min(tokens, begin + per_thread);
  int count = 0;
  for (int64_t t = begin; t < end; ++t) count += starts_document(documents, sequence, t) ? 1 : 0;
  counts[threadIdx.x] = count;
  __syncthreads();
  // Inclusive Hillis–Steele scan.
  for (int offset = 1; offset < kScanThreads; offset *= 2) {
    int add = threadIdx.x >= offset ? counts[threadIdx.x - offset] : 0;
    __syncthreads();
    counts[threadIdx.x] += add;
    __syncthreads();
  }
  int index = counts[threadIdx.x] - count;
  for (int64_t t = begin; t < end; ++t) {
    if (starts_document(documents, sequence, t)) cu_seqlens[index++] = static_cast<int32_t>(t);
  }
  const int total = counts[kScanThreads - 1];
  for (int64_t i = total + threadIdx.x; i <= tokens; i += kScanThreads) cu_seqlens[i] = static_cast<int32_t>(tokens);
}

// ---- plain attention ----

// The document index of a token in the padded cu_seqlens (tokens + 1 entries).
__device__ __forceinline__ int64_t document_of(const int32_t* cu, int64_t tokens, int64_t token) {
  return surogate::cuda::document_index(cu, 0, static_cast<int>(tokens) - 1, token);
}

// The (query token, head) a thread of the forward and dq kernels owns, its kv head, and the keys
// [low, high) it attends to (from its document's start, or the window's, to itself or, not causal,
// to its document's end); false for threads past the last.
struct QueryRow {
  int64_t i, low, high;
  int h, kv;
};
__device__ __forceinline__ bool query_row(const int32_t* cu, const PlainAttentionShape& s, QueryRow& row) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= s.tokens * s.q_heads) return false;
  row.i = index / s.q_heads;
  row.h = static_cast<int>(index % s.q_heads);
  row.kv = row.h / (s.q_heads / s.kv_heads);
  const int64_t document = document_of(cu, s.tokens, row.i);
  row.low = cu[document];
  row.high = s.causal ? row.i + 1 : cu[document + 1];
  if (s.window > 0 && row.i - s.window + 1 > row.low) row.low = row.i - s.window + 1;
  return true;
}

template <typename E>
__global__ void plain_attention_forward_kernel(E* out, float* lse, const E* q, const E* k, const E* v,
                                               const int32_t* cu, PlainAttentionShape s) {
  QueryRow query;
  if (!query_row(cu, s, query)) return;
  const int64_t i = query.i, low = query.low;
  const int h = query.h, kv = query.kv;
  const int D = s.head_dim;
  const E* qi = q + (i * s.q_heads + h) * D;
  float acc[kMaxPlainHeadDim];
  for (int d = 0; d < D; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = low; j < query.high; ++j) {
    const E* kj = k + (j * s.kv_heads + kv) * D;
    const E* vj = v + (j * s.kv_heads + kv) * D;
    float score = 0.0f;
    for (int d = 0; d < D; ++d) score += to_float(qi[d]) * to_float(kj[d]);
    score *= s.scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new), p = expf(score - m_new);
    l = l * correction + p;
    for (int d = 0; d < D; ++d) acc[d] = acc[d] * correction + p * to_float(vj[d]);
    m = m_new;
  }
  E* oi = out + (i * s.q_heads + h) * D;
  for (int d = 0; d < D; ++d) oi[d] = from_float<E>(acc[d] / l);
  lse[static_cast<int64_t>(h) * s.tokens + i] = m + logf(l);
}

template <typename E>
__device__ float row_delta(const E* dout, const E* out, int D) {
  float delta = 0.0f;
  for (int d = 0; d < D; ++d) delta += to_float(dout[d]) * to_float(out[d]);
  return delta;
}

template <typename E>
__device__ float dot(const E* a, const E* b, int D) {
  float sum = 0.0f;
  for (int d = 0; d < D; ++d) sum += to_float(a[d]) * to_float(b[d]);
  return sum;
}

template <typename E>
__global__ void plain_attention_dq_kernel(E* dq, const E* dout, const E* q, const E* k, const E* v,
                                          const E* out, const float* lse, const int32_t* cu, PlainAttentionShape s) {
  QueryRow query;
  if (!query_row(cu, s, query)) return;
  const int64_t i = query.i, low = query.low;
  const int h = query.h, kv = query.kv;
  const int D = s.head_dim;
  const int64_t row = (i * s.q_heads + h) * D;
  const float delta = row_delta(dout + row, out + row, D), l = lse[static_cast<int64_t>(h) * s.tokens + i];
  float acc[kMaxPlainHeadDim];
  for (int d = 0; d < D; ++d) acc[d] = 0.0f;
  for (int64_t j = low; j < query.high; ++j) {
    const E* kj = k + (j * s.kv_heads + kv) * D;
    const E* vj = v + (j * s.kv_heads + kv) * D;
    const float p = expf(dot(q + row, kj, D) * s.scale - l);
    const float ds = p * (dot(dout + row, vj, D) - delta);
    for (int d = 0; d < D; ++d) acc[d] += ds * to_float(kj[d]);
  }
  for (int d = 0; d < D; ++d) dq[row + d] = from_float<E>(acc[d] * s.scale);
}

template <typename E>
__global__ void plain_attention_dkv_kernel(E* dk, E* dv, const E* dout, const E* q, const E* k,
                                           const E* v, const E* out, const float* lse, const int32_t* cu,
                                           PlainAttentionShape s) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= s.tokens * s.kv_heads) return;
  const int64_t j = index / s.kv_heads;
  const int kv = static_cast<int>(index % s.kv_heads), group = s.q_heads / s.kv_heads;
  const int D = s.head_dim;
  const int64_t document = document_of(cu, s.tokens, j);
  const int64_t end = cu[document + 1];
  const int64_t last = s.window > 0 ? min(end, j + s.window) : end;  // queries i < j + window see j
  const int64_t first = s.causal ? j : cu[document];                  // bidirectional: the whole document
  const E* kj = k + (j * s.kv_heads + kv) * D;
  const E* vj = v + (j * s.kv_heads + kv) * D;
  float acc_k[kMaxPlainHeadDim], acc_v[kMaxPlainHeadDim];
  for (int d = 0; d < D; ++d) acc_k[d] = acc_v[d] = 0.0f;
  for (int h = kv * group; h < (kv + 1) * group; ++h) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t row = (i * s.q_heads + h) * D;
      const float p = expf(dot(q + row, kj, D) * s.scale - lse[static_cast<int64_t>(h) * s.tokens + i]);
      const float ds = p * (dot(dout + row, vj, D) - row_delta(dout + row, out + row, D));
      for (int d = 0; d < D; ++d) {
        acc_v[d] += p * to_float(dout[row + d]);
        acc_k[d] += ds * to_float(q[row + d]);
      }
    }
  }
  const int64_t base = (j * s.kv_heads + kv) * D;
  for (int d = 0; d < D; ++d) {
    dk[base + d] = from_float<E>(acc_k[d] * s.scale);
    dv[base + d] = from_float<E>(acc_v[d]);
  }
}

}  // namespace

void cu_seqlens_from_documents(int32_t* cu_seqlens, const int32_t* document_ids, int64_t rows, int64_t sequence,
                               cudaStream_t stream) {
  cu_seqlens_kernel<<<1, kScanThreads, 0, stream>>>(cu_seqlens, document_ids, rows * sequence, sequence);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void plain_attention_forward(E* out, float* logsumexp, const E* q, const E* k, const E* v,
                             const int32_t* cu_seqlens, const PlainAttentionShape& shape, cudaStream_t stream) {
  CUDA_REQUIRE(shape.head_dim > 0 && shape.head_dim <= kMaxPlainHeadDim, "plain attention: head_dim must be 1..256");
  const int64_t threads = shape.tokens * shape.q_heads;
  plain_attention_forward_kernel<E><<<static_cast<unsigned>((threads + 127) / 128), 128, 0, stream>>>(
      out, logsumexp, q, k, v, cu_seqlens, shape);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void plain_attention_backward(E* dq, E* dk, E* dv, const E* dout, const E* q, const E* k,
                              const E* v, const E* out, const float* logsumexp, const int32_t* cu_seqlens,
                              const PlainAttentionShape& shape, cudaStream_t stream) {
  CUDA_REQUIRE(shape.head_dim > 0 && shape.head_dim <= kMaxPlainHeadDim, "plain attention: head_dim must be 1..256");
  const int64_t q_threads = shape.tokens * shape.q_heads, kv_threads = shape.tokens * shape.kv_heads;
  plain_attention_dq_kernel<E><<<static_cast<unsigned>((q_threads + 127) / 128), 128, 0, stream>>>(
      dq, dout, q, k, v, out, logsumexp, cu_seqlens, shape);
  CUDA_CHECK_LAUNCH();
  plain_attention_dkv_kernel<E><<<static_cast<unsigned>((kv_threads + 127) / 128), 128, 0, stream>>>(
      dk, dv, dout, q, k, v, out, logsumexp, cu_seqlens, shape);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                                                      \
  template void plain_attention_forward(E*, float*, const E*, const E*, const E*, const int32_t*,            \
                                        const PlainAttentionShape&, cudaStream_t);                           \
  template void plain_attention_backward(E*, E*, E*, const E*, const E*, const E*, const E*, const E*,       \
                                         const float*, const int32_t*, const PlainAttentionShape&, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
