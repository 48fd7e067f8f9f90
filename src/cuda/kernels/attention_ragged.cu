#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/block/block_scan.cuh>

#include "cuda/cuda_check.h"
#include "cuda/kernels/attention_ragged.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

using kernels::from_float;
using kernels::to_float;

constexpr int kSegmentThreads = 1024;

__device__ __forceinline__ bool starts_segment(const int32_t* ids, int64_t sequence, int64_t t) {
  return t % sequence == 0 || ids[t] != ids[t - 1];
}

__global__ void __launch_bounds__(kSegmentThreads)
    ragged_segments_kernel(int32_t* lengths, int32_t* q_offsets, int32_t* kv_offsets, int32_t* stats_offsets,
                           int32_t* overflow, const int32_t* ids, int64_t tokens, int64_t sequence, int64_t slots,
                           int32_t q_row, int32_t kv_row, int32_t stats_row) {
  using Scan = cub::BlockScan<int, kSegmentThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const int64_t per_thread = (tokens + kSegmentThreads - 1) / kSegmentThreads;
  const int64_t begin = threadIdx.x * per_thread, end = min(tokens, begin + per_thread);
  int count = 0;
  for (int64_t t = begin; t < end; ++t) count += starts_segment(ids, sequence, t) ? 1 : 0;
  int first = 0, total = 0;
  Scan(scan_storage).ExclusiveSum(count, first, total);
  if (total > slots) {
    for (int64_t i = threadIdx.x; i <= slots; i += kSegmentThreads) {
      if (i < slots) lengths[i] = 0;
      q_offsets[i] = kv_offsets[i] = stats_offsets[i] = 0;
    }
    if (threadIdx.x == 0) *overflow = 1;
    return;
  }
  if (threadIdx.x == 0) *overflow = 0;
  // Each segment's first token into q_offsets, the end past the last; then lengths and the other
  // offsets from them; then q_offsets scaled in place (after every reader is done).
  for (int64_t t = begin, at = first; t < end; ++t) {
    if (starts_segment(ids, sequence, t)) q_offsets[at++] = static_cast<int32_t>(t);
  }
  for (int64_t i = total + threadIdx.x; i <= slots; i += kSegmentThreads) q_offsets[i] = static_cast<int32_t>(tokens);
  __syncthreads();
  for (int64_t i = threadIdx.x; i <= slots; i += kSegmentThreads) {
    const int32_t start = q_offsets[i];
    if (i < slots) lengths[i] = q_offsets[i + 1] - start;
    kv_offsets[i] = start * kv_row;
    stats_offsets[i] = start * stats_row;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i <= slots; i += kSegmentThreads) q_offsets[i] *= q_row;
}

// One warp per (token, q head).
template <typename E>
__global__ void padding_forward_kernel(E* out, float* logsumexp, const E* q, const E* k, const E* v,
                                       const int32_t* ids, const int32_t* overflow, RaggedPaddingShape s) {
  const int64_t pair = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (pair >= s.tokens * s.q_heads) return;
  const int64_t t = pair / s.q_heads;
  const int h = static_cast<int>(pair % s.q_heads);
  const bool broken = *overflow != 0;
  if (!broken && ids[t] != -1) return;
  const int kv = h / (s.q_heads / s.kv_heads);
  E* o = out + pair * s.head_dim;
  if (broken) {
    for (int d = lane; d < s.head_dim; d += 32) o[d] = from_float<E>(__int_as_float(0x7fc00000));
    if (lane == 0) logsumexp[pair] = __int_as_float(0x7fc00000);
    return;
  }
  const E* qr = q + pair * s.head_dim;
  const int64_t kv_at = (t * s.kv_heads + kv) * s.head_dim;
  float dot = 0.0f;
  for (int d = lane; d < s.head_dim; d += 32) {
    dot += to_float(qr[d]) * to_float(k[kv_at + d]);
    o[d] = v[kv_at + d];
  }
  for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_down_sync(0xffffffffu, dot, offset);
  if (lane == 0) logsumexp[pair] = dot * s.scale;
}

// One warp per (token, kv head).
template <typename E>
__global__ void padding_backward_kernel(E* dq, E* dk, E* dv, const E* dout, const int32_t* ids,
                                        const int32_t* overflow, RaggedPaddingShape s) {
  const int64_t pair = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (pair >= s.tokens * s.kv_heads) return;
  const int64_t t = pair / s.kv_heads;
  const int kv = static_cast<int>(pair % s.kv_heads);
  const bool broken = *overflow != 0;
  if (!broken && ids[t] != -1) return;
  const int group = s.q_heads / s.kv_heads;
  const float nan = __int_as_float(0x7fc00000);
  for (int d = lane; d < s.head_dim; d += 32) {
    float sum = 0.0f;
    for (int g = 0; g < group; ++g) {
      const int64_t at = (t * s.q_heads + kv * group + g) * s.head_dim + d;
      sum += to_float(dout[at]);
      dq[at] = from_float<E>(broken ? nan : 0.0f);
    }
    dk[pair * s.head_dim + d] = from_float<E>(broken ? nan : 0.0f);
    dv[pair * s.head_dim + d] = from_float<E>(broken ? nan : sum);
  }
}

unsigned warp_blocks(int64_t warps) { return static_cast<unsigned>((warps * 32 + 255) / 256); }

}  // namespace

void ragged_segments_from_documents(int32_t* lengths, int32_t* q_offsets, int32_t* kv_offsets,
                                    int32_t* stats_offsets, int32_t* overflow, const int32_t* document_ids,
                                    int64_t rows, int64_t sequence, int64_t slots, int32_t q_row, int32_t kv_row,
                                    int32_t stats_row, cudaStream_t stream) {
  ragged_segments_kernel<<<1, kSegmentThreads, 0, stream>>>(lengths, q_offsets, kv_offsets, stats_offsets, overflow,
                                                            document_ids, rows * sequence, sequence, slots, q_row,
                                                            kv_row, stats_row);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void ragged_padding_forward(E* out, float* logsumexp, const E* q, const E* k, const E* v,
                            const int32_t* document_ids, const int32_t* overflow, const RaggedPaddingShape& shape,
                            cudaStream_t stream) {
  padding_forward_kernel<E><<<warp_blocks(shape.tokens * shape.q_heads), 256, 0, stream>>>(
      out, logsumexp, q, k, v, document_ids, overflow, shape);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void ragged_padding_backward(E* dq, E* dk, E* dv, const E* dout, const int32_t* document_ids,
                             const int32_t* overflow, const RaggedPaddingShape& shape, cudaStream_t stream) {
  padding_backward_kernel<E><<<warp_blocks(shape.tokens * shape.kv_heads), 256, 0, stream>>>(
      dq, dk, dv, dout, document_ids, overflow, shape);
  CUDA_CHECK_LAUNCH();
}

#define SUROGATE_RAGGED_PADDING(E)                                                                             \
  template void ragged_padding_forward<E>(E*, float*, const E*, const E*, const E*, const int32_t*,           \
                                          const int32_t*, const RaggedPaddingShape&, cudaStream_t);           \
  template void ragged_padding_backward<E>(E*, E*, E*, const E*, const int32_t*, const int32_t*,              \
                                           const RaggedPaddingShape&, cudaStream_t);
SUROGATE_RAGGED_PADDING(__nv_bfloat16)
SUROGATE_RAGGED_PADDING(__half)
#undef SUROGATE_RAGGED_PADDING

}  // namespace surogate::cuda
