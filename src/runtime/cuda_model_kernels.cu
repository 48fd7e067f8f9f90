// Kernels around the model ops; see runtime/cuda_model_kernels.h.
#include "runtime/cuda_model_kernels.h"

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/document_search.cuh"
#include "cuda/kernels/element_type.cuh"
#include "runtime/cuda_launch.cuh"

namespace surogate::runtime::cuda_kernels {
namespace {

constexpr int kMaxPlainHeadDim = 256;


using surogate::cuda::kernels::ElementTraits;
using surogate::cuda::kernels::from_float;
using surogate::cuda::kernels::to_float;

template <typename T>
__device__ __forceinline__ float load(const T* p, int64_t i) { return to_float(p[i]); }
template <typename T>
__device__ __forceinline__ void store(T* p, int64_t i, float v) { p[i] = from_float<T>(v); }

template <typename E>
struct AddOp {
  const E* a; const E* b; E* out;
  __device__ void operator()(int64_t i) const { out[i] = from_float<E>(to_float(a[i]) + to_float(b[i])); }
};
template <typename E>
struct AccumulateOp {
  const E* gradient; E* out;
  __device__ void operator()(int64_t i) const {
    out[i] = from_float<E>(to_float(out[i]) + to_float(gradient[i]));
  }
};
// 8 E per thread (16-byte loads) when the count is a multiple of 8 (arena tensors are 256-byte
// aligned): the residual adds and gradient sums / accumulates are pure bandwidth.
template <bool kAccumulate, typename E>
struct AddVectorOp {
  const E* a; const E* b; E* out;
  __device__ void operator()(int64_t i) const {
    const uint4 left = reinterpret_cast<const uint4*>(kAccumulate ? out : a)[i];
    const uint4 right = reinterpret_cast<const uint4*>(b)[i];
    using Pair = typename ElementTraits<E>::Pair;
    const Pair* l = reinterpret_cast<const Pair*>(&left);
    const Pair* r = reinterpret_cast<const Pair*>(&right);
    uint4 result;
    Pair* o = reinterpret_cast<Pair*>(&result);
    for (int j = 0; j < 4; ++j) {
      const float2 x = ElementTraits<E>::to_float2(l[j]), y = ElementTraits<E>::to_float2(r[j]);
      o[j] = ElementTraits<E>::from_floats(x.x + y.x, x.y + y.y);
    }
    reinterpret_cast<uint4*>(out)[i] = result;
  }
};

template <typename E>
struct FillOp {
  float value; E* out;
  __device__ void operator()(int64_t i) const { out[i] = from_float<E>(value); }
};
template <typename E>
struct ConvertOp {
  const float* in; E* out;
  __device__ void operator()(int64_t i) const { out[i] = from_float<E>(in[i]); }
};

template <typename T>
struct RopeTablesOp {
  T* cos; T* sin; const int32_t* positions; const float* inv_freq; int half; float scaling;
  __device__ void operator()(int64_t i) const {
    const int64_t token = i / half;
    const int f = static_cast<int>(i % half);
    const float angle = __fmul_rn(static_cast<float>(positions[token]), inv_freq[f]);
    store(cos, i, __fmul_rn(cosf(angle), scaling));
    store(sin, i, __fmul_rn(sinf(angle), scaling));
  }
};

template <typename E, typename T>
struct RopeApplyOp {
  E* out; const E* x; const T* cos; const T* sin; int heads, head_dim, half; float sign;
  __device__ void operator()(int64_t i) const {
    const int j = static_cast<int>(i % head_dim);
    const int64_t token = i / (static_cast<int64_t>(heads) * head_dim);
    const int64_t row = i - j;
    float value;
    if (j < half) {
      const float c = load(cos, token * half + j), s = sign * load(sin, token * half + j);
      value = to_float(x[i]) * c - to_float(x[row + j + half]) * s;
    } else if (j < 2 * half) {
      const float c = load(cos, token * half + j - half), s = sign * load(sin, token * half + j - half);
      value = to_float(x[i]) * c + to_float(x[row + j - half]) * s;
    } else {
      value = to_float(x[i]);
    }
    out[i] = from_float<E>(value);
  }
};

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

template <typename E>
__global__ void plain_attention_forward_kernel(E* out, float* lse, const E* q, const E* k, const E* v,
                                               const int32_t* cu, PlainAttentionShape s) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= s.tokens * s.q_heads) return;
  const int64_t i = index / s.q_heads;
  const int h = static_cast<int>(index % s.q_heads), kv = h / (s.q_heads / s.kv_heads);
  const int D = s.head_dim;
  int64_t low = cu[document_of(cu, s.tokens, i)];
  if (s.window > 0 && i - s.window + 1 > low) low = i - s.window + 1;
  const E* qi = q + (i * s.q_heads + h) * D;
  float acc[kMaxPlainHeadDim];
  for (int d = 0; d < D; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = low; j <= i; ++j) {
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
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= s.tokens * s.q_heads) return;
  const int64_t i = index / s.q_heads;
  const int h = static_cast<int>(index % s.q_heads), kv = h / (s.q_heads / s.kv_heads);
  const int D = s.head_dim;
  int64_t low = cu[document_of(cu, s.tokens, i)];
  if (s.window > 0 && i - s.window + 1 > low) low = i - s.window + 1;
  const int64_t row = (i * s.q_heads + h) * D;
  const float delta = row_delta(dout + row, out + row, D), l = lse[static_cast<int64_t>(h) * s.tokens + i];
  float acc[kMaxPlainHeadDim];
  for (int d = 0; d < D; ++d) acc[d] = 0.0f;
  for (int64_t j = low; j <= i; ++j) {
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
  const int64_t end = cu[document_of(cu, s.tokens, j) + 1];
  const int64_t last = s.window > 0 ? min(end, j + s.window) : end;  // queries i < j + window see j
  const E* kj = k + (j * s.kv_heads + kv) * D;
  const E* vj = v + (j * s.kv_heads + kv) * D;
  float acc_k[kMaxPlainHeadDim], acc_v[kMaxPlainHeadDim];
  for (int d = 0; d < D; ++d) acc_k[d] = acc_v[d] = 0.0f;
  for (int h = kv * group; h < (kv + 1) * group; ++h) {
    for (int64_t i = j; i < last; ++i) {
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

template <typename E>
__global__ void bias_gradient_kernel(E* dbias, const E* dout, int64_t rows, int64_t columns) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= columns) return;
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sum += to_float(dout[r * columns + c]);
  dbias[c] = from_float<E>(sum);
}

__global__ void scalar_product_kernel(const float* a, const float* b, float* out) { out[0] = a[0] * b[0]; }

__global__ void count_to_float_kernel(const int32_t* count, float* out) { out[0] = static_cast<float>(count[0]); }

constexpr int kArgmaxThreads = 256;

template <typename E>
__global__ void argmax_hits_kernel(int32_t* hits, const E* logits, const int32_t* labels, int64_t vocab) {
  __shared__ float best_value[kArgmaxThreads];
  __shared__ int64_t best_index[kArgmaxThreads];
  const int64_t row = blockIdx.x;
  const int32_t label = labels[row];
  if (label < 0 || label >= vocab) return;  // whole block returns together
  float value = -INFINITY;
  int64_t index = vocab;
  for (int64_t c = threadIdx.x; c < vocab; c += kArgmaxThreads) {
    const float x = to_float(logits[row * vocab + c]);
    if (x > value) { value = x; index = c; }  // strided ascending: the first maximum of the slice
  }
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int offset = kArgmaxThreads / 2; offset > 0; offset /= 2) {
    if (threadIdx.x < offset) {
      const float other = best_value[threadIdx.x + offset];
      const int64_t other_index = best_index[threadIdx.x + offset];
      if (other > best_value[threadIdx.x] || (other == best_value[threadIdx.x] && other_index < best_index[threadIdx.x])) {
        best_value[threadIdx.x] = other;
        best_index[threadIdx.x] = other_index;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && best_index[0] == label) atomicAdd(hits, 1);
}

}  // namespace

static bool vectorizable(int64_t count, const void* a, const void* b, const void* c) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return count % 8 == 0 && aligned(a) && aligned(b) && aligned(c);
}

template <typename E>
void add_16bit(const E* a, const E* b, E* out, int64_t count, cudaStream_t stream) {
  if (vectorizable(count, a, b, out)) launch(AddVectorOp<false, E>{a, b, out}, count / 8, stream);
  else launch(AddOp<E>{a, b, out}, count, stream);
}
template <typename E>
void accumulate_16bit(const E* gradient, E* out, int64_t count, cudaStream_t stream) {
  if (vectorizable(count, gradient, gradient, out)) {
    launch(AddVectorOp<true, E>{nullptr, gradient, out}, count / 8, stream);
  } else {
    launch(AccumulateOp<E>{gradient, out}, count, stream);
  }
}
template <typename E>
void fill_16bit(float value, E* out, int64_t count, cudaStream_t stream) {
  launch(FillOp<E>{value, out}, count, stream);
}
template <typename E>
void convert_from_f32(const float* in, E* out, int64_t count, cudaStream_t stream) {
  launch(ConvertOp<E>{in, out}, count, stream);
}

template <typename T>
void rope_tables(T* cos, T* sin, const int32_t* position_ids, const float* inv_freq, int64_t tokens, int half,
                 float scaling, cudaStream_t stream) {
  launch(RopeTablesOp<T>{cos, sin, position_ids, inv_freq, half, scaling}, tokens * half, stream);
}

template <typename E, typename T>
void rope_apply(E* out, const E* x, const T* cos, const T* sin, int64_t tokens, int heads, int head_dim,
                int half, float sign, cudaStream_t stream) {
  launch(RopeApplyOp<E, T>{out, x, cos, sin, heads, head_dim, half, sign}, tokens * heads * head_dim, stream);
}

template void rope_tables<float>(float*, float*, const int32_t*, const float*, int64_t, int, float, cudaStream_t);

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

template <typename E>
void bias_gradient(E* dbias, const E* dout, int64_t rows, int64_t columns, cudaStream_t stream) {
  bias_gradient_kernel<E><<<static_cast<unsigned>((columns + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      dbias, dout, rows, columns);
  CUDA_CHECK_LAUNCH();
}

void scalar_product(const float* a, const float* b, float* out, cudaStream_t stream) {
  scalar_product_kernel<<<1, 1, 0, stream>>>(a, b, out);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void argmax_hits(int32_t* hits, const E* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  argmax_hits_kernel<E><<<static_cast<unsigned>(rows), kArgmaxThreads, 0, stream>>>(hits, logits, labels, vocab);
  CUDA_CHECK_LAUNCH();
}

void count_to_float(const int32_t* count, float* out, cudaStream_t stream) {
  count_to_float_kernel<<<1, 1, 0, stream>>>(count, out);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                                                      \
  template void add_16bit(const E*, const E*, E*, int64_t, cudaStream_t);                                    \
  template void accumulate_16bit(const E*, E*, int64_t, cudaStream_t);                                       \
  template void fill_16bit(float, E*, int64_t, cudaStream_t);                                                \
  template void convert_from_f32(const float*, E*, int64_t, cudaStream_t);                                   \
  template void rope_tables<E>(E*, E*, const int32_t*, const float*, int64_t, int, float, cudaStream_t);     \
  template void rope_apply<E, float>(E*, const E*, const float*, const float*, int64_t, int, int, int, float, \
                                     cudaStream_t);                                                          \
  template void rope_apply<E, E>(E*, const E*, const E*, const E*, int64_t, int, int, int, float, cudaStream_t); \
  template void plain_attention_forward(E*, float*, const E*, const E*, const E*, const int32_t*,            \
                                        const PlainAttentionShape&, cudaStream_t);                           \
  template void plain_attention_backward(E*, E*, E*, const E*, const E*, const E*, const E*, const E*,       \
                                         const float*, const int32_t*, const PlainAttentionShape&, cudaStream_t); \
  template void bias_gradient(E*, const E*, int64_t, int64_t, cudaStream_t);                                 \
  template void argmax_hits(int32_t*, const E*, const int32_t*, int64_t, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::runtime::cuda_kernels
