// RoPE kernels (see rope.h). The backward is the forward with the sine negated.
#include "cuda/cuda_check.h"
#include "cuda/kernels/rope.h"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

using kernels::kPackWidth;

template <bool kBackward, typename T>
__global__ void rope_kernel(T* out, const T* in, const float* inv_freq,
                            const int32_t* position_ids, int64_t tokens, int heads, int head_dim, int rotary_dim,
                            float scaling) {
  const int vectors_per_head = head_dim / kPackWidth;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= tokens * heads * vectors_per_head) return;
  const int vector = static_cast<int>(index % vectors_per_head);
  const int64_t head_row = index / vectors_per_head;  // token * heads + head
  const int64_t token = head_row / heads;
  const int first = vector * kPackWidth;
  const int half = rotary_dim / 2;
  const int64_t base = head_row * head_dim;
  if (first >= rotary_dim) {  // pass-through channels
    if (out != in) kernels::store_x8(out + base + first, kernels::load_x8(in + base + first));
    return;
  }
  if (first >= half) return;  // rotated by the thread owning the partner vector
  float low[kPackWidth], high[kPackWidth], out_low[kPackWidth], out_high[kPackWidth];
  kernels::unpack(kernels::load_x8(in + base + first), low);
  kernels::unpack(kernels::load_x8(in + base + first + half), high);
  const float position = static_cast<float>(position_ids[token]);
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) {
    float sine, cosine;
    sincosf(position * inv_freq[first + i], &sine, &cosine);
    cosine *= scaling;
    sine *= kBackward ? -scaling : scaling;
    out_low[i] = low[i] * cosine - high[i] * sine;
    out_high[i] = high[i] * cosine + low[i] * sine;
  }
  kernels::store_x8(out + base + first, kernels::pack<T>(out_low));
  kernels::store_x8(out + base + first + half, kernels::pack<T>(out_high));
}

template <bool kBackward, typename T>
void launch(T* out, const T* in, const float* inv_freq, const int32_t* position_ids,
            int64_t tokens, int heads, int head_dim, int rotary_dim, float scaling, cudaStream_t stream) {
  CUDA_REQUIRE(head_dim % kPackWidth == 0, "rope: head_dim must be a multiple of 8");
  CUDA_REQUIRE(rotary_dim % (2 * kPackWidth) == 0 && rotary_dim > 0 && rotary_dim <= head_dim,
               "rope: rotary_dim must be a positive multiple of 16, at most head_dim");
  const int64_t work = tokens * heads * (head_dim / kPackWidth);
  if (work == 0) return;
  constexpr int kThreads = 256;
  rope_kernel<kBackward, T><<<static_cast<unsigned>((work + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      out, in, inv_freq, position_ids, tokens, heads, head_dim, rotary_dim, scaling);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T>
void rope_forward(T* out, const T* in, const float* inv_freq, const int32_t* position_ids,
                  int64_t tokens, int heads, int head_dim, int rotary_dim, float scaling, cudaStream_t stream) {
  launch<false, T>(out, in, inv_freq, position_ids, tokens, heads, head_dim, rotary_dim, scaling, stream);
}

template <typename T>
void rope_backward(T* dinput, const T* dout, const float* inv_freq,
                   const int32_t* position_ids, int64_t tokens, int heads, int head_dim, int rotary_dim,
                   float scaling, cudaStream_t stream) {
  launch<true, T>(dinput, dout, inv_freq, position_ids, tokens, heads, head_dim, rotary_dim, scaling, stream);
}

#define INSTANTIATE(T)                                                                                    \
  template void rope_forward(T*, const T*, const float*, const int32_t*, int64_t, int, int, int, float,       \
                             cudaStream_t);                                                                   \
  template void rope_backward(T*, const T*, const float*, const int32_t*, int64_t, int, int, int, float, \
                              cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
