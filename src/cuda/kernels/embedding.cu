// Embedding lookup and its scatter-add gradient (see embedding.h).
#include "cuda/cuda_check.h"
#include "cuda/kernels/embedding.h"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

using kernels::kPackWidth;

// One thread per 8 channels of a token's row: its token, first channel and id; false past the end.
struct RowVector {
  int64_t token = 0, column = 0;
  int32_t id = 0;
};
__device__ __forceinline__ bool row_vector(const int32_t* ids, int64_t tokens, int64_t channels, RowVector& at) {
  const int64_t vectors_per_row = channels / kPackWidth;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= tokens * vectors_per_row) return false;
  at.token = index / vectors_per_row;
  at.column = (index % vectors_per_row) * kPackWidth;
  at.id = ids[at.token];
  return true;
}

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* ids, const T* table,
                                         int64_t tokens, int64_t vocab, int64_t channels) {
  RowVector at;
  if (!row_vector(ids, tokens, channels, at)) return;
  const int64_t token = at.token, column = at.column, id = at.id;
  kernels::Vec8<T> value{};
  if (id >= 0 && id < vocab) value = kernels::load_x8(table + id * channels + column);
  kernels::store_x8(out + token * channels + column, value);
}

template <typename T>
__global__ void embedding_backward_kernel(float* dtable, const int32_t* ids, const T* dout,
                                          int64_t tokens, int64_t vocab, int64_t channels) {
  RowVector at;
  if (!row_vector(ids, tokens, channels, at) || at.id < 0 || at.id >= vocab) return;
  const int64_t token = at.token, column = at.column, id = at.id;
  float values[kPackWidth];
  kernels::unpack(kernels::load_x8(dout + token * channels + column), values);
  float* target = dtable + id * channels + column;
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) atomicAdd(target + i, values[i]);
}

// The rows the batch's ids touch, in fp32 scratch: zeroed before the scatter-add.
__global__ void zero_rows_kernel(float* dtable, const int32_t* ids, int64_t tokens, int64_t vocab, int64_t channels) {
  RowVector at;
  if (!row_vector(ids, tokens, channels, at) || at.id < 0 || at.id >= vocab) return;
  const int64_t column = at.column, id = at.id;
  float4* target = reinterpret_cast<float4*>(dtable + id * channels + column);
  target[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  target[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// ... and after it rounded into the 16-bit gradient (a repeated id writes its row again, the same
// values).
template <typename T>
__global__ void convert_rows_kernel(T* out, const float* dtable, const int32_t* ids, int64_t tokens, int64_t vocab,
                                    int64_t channels) {
  RowVector at;
  if (!row_vector(ids, tokens, channels, at) || at.id < 0 || at.id >= vocab) return;
  const int64_t column = at.column, id = at.id;
  const float4* source = reinterpret_cast<const float4*>(dtable + id * channels + column);
  const float4 low = source[0], high = source[1];
  const float values[kPackWidth] = {low.x, low.y, low.z, low.w, high.x, high.y, high.z, high.w};
  kernels::store_x8(out + id * channels + column, kernels::pack<T>(values));
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work) { return static_cast<unsigned>((work + kThreads - 1) / kThreads); }

}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int64_t tokens,
                       int64_t vocab, int64_t channels, cudaStream_t stream) {
  CUDA_REQUIRE(channels % kPackWidth == 0, "embedding: channels must be a multiple of 8");
  if (tokens == 0) return;
  embedding_forward_kernel<<<blocks_for(tokens * channels / kPackWidth), kThreads, 0, stream>>>(out, ids, table, tokens,
                                                                                              vocab, channels);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void embedding_backward(float* dtable, const int32_t* ids, const T* dout, int64_t tokens, int64_t vocab,
                        int64_t channels, cudaStream_t stream) {
  CUDA_REQUIRE(channels % kPackWidth == 0, "embedding: channels must be a multiple of 8");
  if (tokens == 0) return;
  embedding_backward_kernel<<<blocks_for(tokens * channels / kPackWidth), kThreads, 0, stream>>>(
      dtable, ids, dout, tokens, vocab, channels);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void embedding_backward_rows(T* dtable, float* rows_scratch, const int32_t* ids, const T* dout, int64_t tokens,
                             int64_t vocab, int64_t channels, cudaStream_t stream) {
  CUDA_REQUIRE(channels % kPackWidth == 0, "embedding: channels must be a multiple of 8");
  CUDA_CHECK(cudaMemsetAsync(dtable, 0, sizeof(T) * vocab * channels, stream));  // +0 in bf16 and fp16
  if (tokens == 0) return;
  const unsigned blocks = blocks_for(tokens * channels / kPackWidth);
  zero_rows_kernel<<<blocks, kThreads, 0, stream>>>(rows_scratch, ids, tokens, vocab, channels);
  CUDA_CHECK_LAUNCH();
  embedding_backward(rows_scratch, ids, dout, tokens, vocab, channels, stream);
  convert_rows_kernel<<<blocks, kThreads, 0, stream>>>(dtable, rows_scratch, ids, tokens, vocab, channels);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(T)                                                                                      \
  template void embedding_forward(T*, const int32_t*, const T*, int64_t, int64_t, int64_t, cudaStream_t);  \
  template void embedding_backward(float*, const int32_t*, const T*, int64_t, int64_t, int64_t, cudaStream_t); \
  template void embedding_backward_rows(T*, float*, const int32_t*, const T*, int64_t, int64_t, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
