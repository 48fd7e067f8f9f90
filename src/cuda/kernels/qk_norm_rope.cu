// Fused per-head RMSNorm + RoPE kernels (see qk_norm_rope.h).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/column_sums.cuh"
#include "cuda/kernels/fp8_epilogue.cuh"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/kernels/qk_norm_rope_row.cuh"
#include "cuda/kernels/vector_math.cuh"
#include "cuda/kernels/programmatic_launch.cuh"

namespace surogate::cuda {
namespace {

using kernels::kPackWidth;

constexpr int kThreads = 256;
constexpr int kMaxBackwardBlocks = 256;

using norm_rope::group_sum;
using norm_rope::rotation;

// The forward of block `block` of one tensor's launch (the whole grid, or its part of a pair's).
template <typename T, bool kEarly>
__device__ __forceinline__ void norm_rope_block(T* out, float* rstd_out, const T* input, const T* weight,
                                                const float* inv_freq, const int32_t* position_ids,
                                                const QkNormRopeShape& shape, int64_t block) {
  const int lanes = shape.head_dim / 16;
  const int64_t rows = shape.tokens * shape.heads;
  const int64_t row = (block * kThreads + threadIdx.x) / lanes;
  const bool active = row < rows;  // inactive lanes still join the shuffles
  const int64_t at = active ? row : 0;
  norm_rope::row_forward<T, kEarly>(out + at * shape.head_dim, rstd_out + at, input + at * shape.head_dim, weight,
                                    inv_freq, position_ids + at / shape.heads, shape.head_dim, shape.epsilon,
                                    shape.scaling, static_cast<int>(threadIdx.x % lanes), active);
}

template <typename T>
__global__ void qk_norm_rope_forward_kernel(T* out, float* rstd_out, const T* input, const T* weight,
                                            const float* inv_freq, const int32_t* position_ids, QkNormRopeShape shape) {
  norm_rope_block<T, false>(out, rstd_out, input, weight, inv_freq, position_ids, shape, blockIdx.x);
}

// q's blocks first, then k's (`q_blocks` of them for q).
template <typename T>
__global__ void qk_norm_rope_pair_kernel(QkNormRopeTensor<T> q, QkNormRopeTensor<T> k, const float* inv_freq,
                                         const int32_t* position_ids, QkNormRopeShape q_shape, int k_heads,
                                         int64_t q_blocks) {
  // The decode step's launch (programmatic_launch.cuh): nothing is touched before the wait.
  wait_for_previous_grid();
  allow_next_grid();
  if (blockIdx.x < q_blocks) {
    norm_rope_block<T, true>(q.out, q.rstd, q.input, q.weight, inv_freq, position_ids, q_shape, blockIdx.x);
    return;
  }
  QkNormRopeShape k_shape = q_shape;
  k_shape.heads = k_heads;
  norm_rope_block<T, true>(k.out, k.rstd, k.input, k.weight, inv_freq, position_ids, k_shape, blockIdx.x - q_blocks);
}

int64_t forward_blocks(const QkNormRopeShape& shape) {
  return (shape.tokens * shape.heads * (shape.head_dim / 16) + kThreads - 1) / kThreads;
}

// kFp8: 0, or the FP8 format (1 E4M3, 2 E5M2) dinput's codes are also written in (T = bf16;
// fp8_epilogue.cuh: the fp8_hybrid recipe's gradient for the q / k projection that reads dinput).
template <typename T, int kFp8 = 0>
__global__ void qk_norm_rope_backward_kernel(T* dinput, float* partials, const T* dout,
                                             const T* input, const T* weight,
                                             const float* rstd_in, const float* inv_freq,
                                             const int32_t* position_ids, QkNormRopeShape shape, Fp8Output fp8_out) {
  extern __shared__ float lane_partials[];  // [kThreads][16]: this thread's dw for its 16 channels
  [[maybe_unused]] fp8::EpilogueState site;
  [[maybe_unused]] unsigned fp8_bits = 0;
  if constexpr (kFp8 != 0) site = fp8::epilogue_begin(fp8_out.row, fp8_out.scale_inv, blockIdx.x == 0,
                                                      kFp8 == 1 ? 448.0f : 57344.0f);
  const int lanes = shape.head_dim / 16, half = shape.head_dim / 2;
  const int rows_per_block = kThreads / lanes;
  const int64_t rows = shape.tokens * shape.heads;
  const int lane = threadIdx.x % lanes, first = lane * kPackWidth;
  float w_low[kPackWidth], w_high[kPackWidth];
  kernels::unpack(kernels::load_x8(weight + first), w_low);
  kernels::unpack(kernels::load_x8(weight + first + half), w_high);
  float dw_low[kPackWidth] = {}, dw_high[kPackWidth] = {};

  for (int64_t base = int64_t{blockIdx.x} * rows_per_block; base < rows; base += int64_t{gridDim.x} * rows_per_block) {
    const int64_t row = base + threadIdx.x / lanes;
    const bool active = row < rows;
    float x_low[kPackWidth] = {}, x_high[kPackWidth] = {}, g_low[kPackWidth] = {}, g_high[kPackWidth] = {};
    float dot = 0.0f, rstd = 0.0f;
    if (active) {
      float dy_low[kPackWidth], dy_high[kPackWidth], cosine[kPackWidth], sine[kPackWidth];
      kernels::unpack(kernels::load_x8(dout + row * shape.head_dim + first), dy_low);
      kernels::unpack(kernels::load_x8(dout + row * shape.head_dim + first + half), dy_high);
      kernels::unpack(kernels::load_x8(input + row * shape.head_dim + first), x_low);
      kernels::unpack(kernels::load_x8(input + row * shape.head_dim + first + half), x_high);
      rotation(cosine, sine, inv_freq, first, static_cast<float>(position_ids[row / shape.heads]), shape.scaling,
               -1.0f);
      rstd = rstd_in[row];
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) {
        const float dn_low = dy_low[i] * cosine[i] - dy_high[i] * sine[i];
        const float dn_high = dy_high[i] * cosine[i] + dy_low[i] * sine[i];
        x_low[i] *= rstd;
        x_high[i] *= rstd;
        g_low[i] = dn_low * w_low[i];
        g_high[i] = dn_high * w_high[i];
        dot += g_low[i] * x_low[i] + g_high[i] * x_high[i];
        dw_low[i] += dn_low * x_low[i];
        dw_high[i] += dn_high * x_high[i];
      }
    }
    dot = group_sum(dot, lanes) / shape.head_dim;
    if (!active) continue;
    float dx_low[kPackWidth], dx_high[kPackWidth];
#pragma unroll
    for (int i = 0; i < kPackWidth; ++i) {
      dx_low[i] = rstd * (g_low[i] - x_low[i] * dot);
      dx_high[i] = rstd * (g_high[i] - x_high[i] * dot);
    }
    const kernels::Vec8<T> packed_low = kernels::pack<T>(dx_low), packed_high = kernels::pack<T>(dx_high);
    if (kFp8 == 0 || dinput != nullptr) {  // the FP8 form may skip an unread bf16 d_x
      kernels::store_x8(dinput + row * shape.head_dim + first, packed_low);
      kernels::store_x8(dinput + row * shape.head_dim + first + half, packed_high);
    }
    if constexpr (kFp8 != 0) {
      kernels::unpack(packed_low, dx_low);  // the bf16 values dinput holds
      kernels::unpack(packed_high, dx_high);
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) {
        fp8_bits = max(fp8_bits, max(fp8::amax_bits(dx_low[i]), fp8::amax_bits(dx_high[i])));
      }
      if (site.delayed) {
        uint2* codes = reinterpret_cast<uint2*>(fp8_out.q);
        const int64_t low = (row * shape.head_dim + first) / kPackWidth, high = low + half / kPackWidth;
        codes[low] = kFp8 == 1 ? fp8::encode8<__NV_E4M3>(dx_low, site.scale) : fp8::encode8<__NV_E5M2>(dx_low, site.scale);
        codes[high] =
            kFp8 == 1 ? fp8::encode8<__NV_E4M3>(dx_high, site.scale) : fp8::encode8<__NV_E5M2>(dx_high, site.scale);
      }
    }
  }

  if constexpr (kFp8 != 0) fp8::epilogue_end(site, fp8_bits, fp8_out.row, fp8_out.amax);  // every thread: a barrier
  if (partials == nullptr) return;  // frozen weight: no dw (uniform over the block)
  // Fixed-order reduction of the block's lanes that own the same channels.
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) {
    lane_partials[threadIdx.x * 16 + i] = dw_low[i];
    lane_partials[threadIdx.x * 16 + 8 + i] = dw_high[i];
  }
  __syncthreads();
  for (int channel = threadIdx.x; channel < shape.head_dim; channel += kThreads) {
    const int owner = channel < half ? channel / kPackWidth : (channel - half) / kPackWidth;
    const int slot = channel < half ? channel % kPackWidth : 8 + (channel - half) % kPackWidth;
    float sum = 0.0f;
    for (int r = 0; r < rows_per_block; ++r) sum += lane_partials[(r * lanes + owner) * 16 + slot];
    partials[int64_t{blockIdx.x} * shape.head_dim + channel] = sum;
  }
}

void check_shape(const QkNormRopeShape& shape) {
  CUDA_REQUIRE(shape.head_dim % 16 == 0 && shape.head_dim >= 16 && shape.head_dim <= 256 &&
                   ((shape.head_dim / 16) & (shape.head_dim / 16 - 1)) == 0,
               "qk_norm_rope: head_dim must be 16, 32, 64, 128 or 256");
  CUDA_REQUIRE(shape.heads > 0, "qk_norm_rope: heads must be positive");
}

int64_t backward_blocks(const QkNormRopeShape& shape) {
  const int64_t rows_per_block = kThreads / (shape.head_dim / 16);
  const int64_t needed = (shape.tokens * shape.heads + rows_per_block - 1) / rows_per_block;
  return std::clamp<int64_t>(needed, 1, kMaxBackwardBlocks);
}

}  // namespace

template <typename T>
void qk_norm_rope_forward(T* out, float* rstd, const T* input, const T* weight,
                          const float* inv_freq, const int32_t* position_ids, const QkNormRopeShape& shape,
                          cudaStream_t stream) {
  check_shape(shape);
  const int64_t blocks = forward_blocks(shape);
  if (blocks == 0) return;
  qk_norm_rope_forward_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(out, rstd, input, weight,
                                                                                          inv_freq, position_ids, shape);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void qk_norm_rope_forward_pair(const QkNormRopeTensor<T>& q, const QkNormRopeTensor<T>& k, const float* inv_freq,
                               const int32_t* position_ids, const QkNormRopeShape& q_shape, int k_heads,
                               cudaStream_t stream) {
  QkNormRopeShape k_shape = q_shape;
  k_shape.heads = k_heads;
  check_shape(q_shape);
  check_shape(k_shape);
  const int64_t q_blocks = forward_blocks(q_shape), blocks = q_blocks + forward_blocks(k_shape);
  if (blocks == 0) return;
  launch_programmatic(qk_norm_rope_pair_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, true, q,
                      k, inv_freq, position_ids, q_shape, k_heads, q_blocks);
  CUDA_CHECK_LAUNCH();
}

int64_t qk_norm_rope_backward_scratch_floats(const QkNormRopeShape& shape) {
  return backward_blocks(shape) * shape.head_dim;
}

template <typename T>
void qk_norm_rope_backward(T* dinput, float* dweight, float* scratch, const T* dout,
                           const T* input, const T* weight, const float* rstd,
                           const float* inv_freq, const int32_t* position_ids, const QkNormRopeShape& shape,
                           cudaStream_t stream) {
  check_shape(shape);
  if (shape.tokens * shape.heads == 0) return;
  const int blocks = static_cast<int>(backward_blocks(shape));
  qk_norm_rope_backward_kernel<T><<<blocks, kThreads, kThreads * 16 * sizeof(float), stream>>>(
      dinput, dweight ? scratch : nullptr, dout, input, weight, rstd, inv_freq, position_ids, shape, Fp8Output{});
  CUDA_CHECK_LAUNCH();
  if (dweight == nullptr) return;
  add_column_sums(dweight, scratch, blocks, shape.head_dim, stream);
}

void qk_norm_rope_backward_fp8(__nv_bfloat16* dinput, float* dweight, float* scratch, const __nv_bfloat16* dout,
                               const __nv_bfloat16* input, const __nv_bfloat16* weight, const float* rstd,
                               const float* inv_freq, const int32_t* position_ids, const QkNormRopeShape& shape,
                               const Fp8Output& fp8_out, cudaStream_t stream) {
  check_shape(shape);
  CUDA_REQUIRE(dinput != nullptr || fp8_out.delayed_known,
               "qk_norm_rope_backward_fp8: no bf16 d_x only with a known delayed amax");
  if (shape.tokens * shape.heads == 0) return;
  const int blocks = static_cast<int>(backward_blocks(shape));
  using bf16 = __nv_bfloat16;
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kThreads, kThreads * 16 * sizeof(float), stream>>>(
        dinput, dweight ? scratch : nullptr, dout, input, weight, rstd, inv_freq, position_ids, shape, fp8_out);
  };
  fp8_out.format == Fp8Target::E4M3 ? launch(qk_norm_rope_backward_kernel<bf16, 1>)
                                    : launch(qk_norm_rope_backward_kernel<bf16, 2>);
  CUDA_CHECK_LAUNCH();
  fp8_quantize_pending(dinput, shape.tokens * shape.heads * shape.head_dim, fp8_out, stream);
  if (dweight == nullptr) return;
  add_column_sums(dweight, scratch, blocks, shape.head_dim, stream);
}

#define INSTANTIATE(T) \
  template void qk_norm_rope_forward_pair(const QkNormRopeTensor<T>&, const QkNormRopeTensor<T>&, const float*, \
                                          const int32_t*, const QkNormRopeShape&, int, cudaStream_t); \
  template void qk_norm_rope_forward(T*, float*, const T*, const T*, const float*, const int32_t*, \
                                     const QkNormRopeShape&, cudaStream_t); \
  template void qk_norm_rope_backward(T*, float*, float*, const T*, const T*, const T*, const float*, const float*, \
                                      const int32_t*, const QkNormRopeShape&, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
