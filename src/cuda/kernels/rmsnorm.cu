// RMSNorm kernels (see rmsnorm.h for the maths, layouts and what is saved).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/column_sums.cuh"
#include "cuda/kernels/fp8_epilogue.cuh"
#include "cuda/kernels/programmatic_launch.cuh"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

using kernels::kPackWidth;

constexpr int kMaxVectorsPerThread = 4;
constexpr int64_t kBackwardPartials = 512;

// kFp8: also the E4M3 codes of `out` for the fp8_hybrid recipe (fp8_epilogue.cuh), T = bf16.
// kStaged: every load of the row first, packed (4 registers a vector) — one trip to memory rather
// than one per vector, which a store to residual_out between them (it may alias, for all the
// compiler knows) otherwise orders. A few rows (a decode step's norm) are that latency: Qwen3-8B's
// decode layer 114.7 → 110.7 µs with the q/k norm's loads alike (2026-11-30, decode_layer_bench);
// many rows are bandwidth, where the registers cost occupancy (16,384 × 4,096: 0.081 → 0.097 ms),
// so they keep the loads where they are used (launch_forward picks by the row count). Same bits either way.
template <bool kResidual, bool kFp8, typename T, bool kStaged = false>
__global__ void __launch_bounds__(1024) rmsnorm_forward_kernel(T* out, T* residual_out, float* rstd_out,
                                                               const T* residual_in, const T* input, const T* weight,
                                                               int channels, float epsilon, Fp8Output fp8_out) {
  __shared__ float scratch[32];
  // Launched programmatically (programmatic_launch.cuh): nothing is touched before the wait.
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t row_offset = static_cast<int64_t>(blockIdx.x) * channels;
  const int vectors = channels / kPackWidth;
  kernels::Vec8<T> packed[kMaxVectorsPerThread], w_packed[kMaxVectorsPerThread];
  [[maybe_unused]] kernels::Vec8<T> residual_packed[kMaxVectorsPerThread];
  if constexpr (kStaged) {
#pragma unroll
    for (int v = 0; v < kMaxVectorsPerThread; ++v) {
      const int vector = threadIdx.x + v * blockDim.x;
      if (vector >= vectors) continue;
      packed[v] = kernels::load_x8(input + row_offset + vector * kPackWidth);
      if constexpr (kResidual) residual_packed[v] = kernels::load_x8(residual_in + row_offset + vector * kPackWidth);
      w_packed[v] = kernels::load_x8(weight + vector * kPackWidth);
    }
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int vector = threadIdx.x + v * blockDim.x;
    if (vector >= vectors) continue;
    if constexpr (!kStaged) {
      packed[v] = kernels::load_x8(input + row_offset + vector * kPackWidth);
      if constexpr (kResidual) residual_packed[v] = kernels::load_x8(residual_in + row_offset + vector * kPackWidth);
    }
    float values[kPackWidth];
    kernels::unpack(packed[v], values);
    if constexpr (kResidual) {
      float residual[kPackWidth];
      kernels::unpack(residual_packed[v], residual);
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) values[i] += residual[i];
      packed[v] = kernels::pack<T>(values);
      kernels::store_x8(residual_out + row_offset + vector * kPackWidth, packed[v]);
      kernels::unpack(packed[v], values);  // normalise exactly what was saved
    }
#pragma unroll
    for (int i = 0; i < kPackWidth; ++i) sum_squares += values[i] * values[i];
  }
  sum_squares = kernels::block_sum(sum_squares, scratch);
  const float rstd = rsqrtf(sum_squares / channels + epsilon);
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;
  float values[kMaxVectorsPerThread][kPackWidth];
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int vector = threadIdx.x + v * blockDim.x;
    if (vector >= vectors) continue;
    if constexpr (!kStaged) w_packed[v] = kernels::load_x8(weight + vector * kPackWidth);
    float w[kPackWidth];
    kernels::unpack(packed[v], values[v]);
    kernels::unpack(w_packed[v], w);
#pragma unroll
    for (int i = 0; i < kPackWidth; ++i) values[v][i] = values[v][i] * rstd * w[i];
    if (out != nullptr) kernels::store_x8(out + row_offset + vector * kPackWidth, kernels::pack<T>(values[v]));
  }
  if constexpr (kFp8) {
    const fp8::EpilogueState site = fp8::epilogue_begin(fp8_out.row, fp8_out.scale_inv, blockIdx.x == 0);
    unsigned bits = 0;
#pragma unroll
    for (int v = 0; v < kMaxVectorsPerThread; ++v) {
      const int vector = threadIdx.x + v * blockDim.x;
      if (vector >= vectors) continue;
      float rounded[kPackWidth];
      kernels::unpack(kernels::pack<T>(values[v]), rounded);  // the bf16 values `out` holds
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) bits = max(bits, fp8::amax_bits(rounded[i]));
      if (site.delayed) {
        reinterpret_cast<uint2*>(fp8_out.q + row_offset)[vector] = fp8::encode8_e4m3(rounded, site.scale);
      }
    }
    fp8::epilogue_end(site, bits, fp8_out.row, fp8_out.amax);
  }
}

// kFp8: 0, or the FP8 format (1 E4M3, 2 E5M2) dinput's codes are also written in (T = bf16;
// fp8_epilogue.cuh: the fp8_hybrid recipe's gradient for the projection that reads dinput).
template <int kVectors, typename T, int kFp8 = 0>
__global__ void __launch_bounds__(kVectors < 4 ? 512 : 1024)
    rmsnorm_backward_kernel(T* dinput, float* partials, const T* dout,
                                        const T* dresidual, const T* input,
                                        const T* weight, const float* rstd_in, int64_t rows,
                                        int channels, Fp8Output fp8_out) {
  [[maybe_unused]] fp8::EpilogueState site;
  [[maybe_unused]] unsigned fp8_bits = 0;
  if constexpr (kFp8 != 0) site = fp8::epilogue_begin(fp8_out.row, fp8_out.scale_inv, blockIdx.x == 0,
                                                      kFp8 == 1 ? 448.0f : 57344.0f);
  __shared__ float scratch[32];
  const int vectors = channels / kPackWidth;
  float weights[kVectors][kPackWidth];
  float dweight[kVectors][kPackWidth];
#pragma unroll
  for (int v = 0; v < kVectors; ++v) {
    const int vector = threadIdx.x + v * blockDim.x;
#pragma unroll
    for (int i = 0; i < kPackWidth; ++i) dweight[v][i] = 0.0f;
    if (vector < vectors) kernels::unpack(kernels::load_x8(weight + vector * kPackWidth), weights[v]);
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t row_offset = row * channels;
    const float rstd = rstd_in[row];
    float normalized[kVectors][kPackWidth];
    float scaled_grad[kVectors][kPackWidth];
    float residual[kVectors][kPackWidth];
    float dot = 0.0f;
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const int vector = threadIdx.x + v * blockDim.x;
      if (vector >= vectors) continue;
      float dy[kPackWidth];
      kernels::unpack(kernels::load_x8(input + row_offset + vector * kPackWidth), normalized[v]);
      kernels::unpack(kernels::load_x8(dout + row_offset + vector * kPackWidth), dy);
      // The residual gradient is loaded with the others, before the reduction, so all three
      // reads of the row are in flight together.
      if (dresidual) {
        kernels::unpack(kernels::load_x8(dresidual + row_offset + vector * kPackWidth), residual[v]);
      } else {
#pragma unroll
        for (int i = 0; i < kPackWidth; ++i) residual[v][i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i) {
        normalized[v][i] *= rstd;
        scaled_grad[v][i] = dy[i] * weights[v][i];
        dot += scaled_grad[v][i] * normalized[v][i];
        dweight[v][i] += dy[i] * normalized[v][i];
      }
    }
    const float mean_dot = kernels::block_sum(dot, scratch) / channels;
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const int vector = threadIdx.x + v * blockDim.x;
      if (vector >= vectors) continue;
      const int64_t offset = row_offset + vector * kPackWidth;
      float result[kPackWidth];
#pragma unroll
      for (int i = 0; i < kPackWidth; ++i)
        result[i] = rstd * (scaled_grad[v][i] - normalized[v][i] * mean_dot) + residual[v][i];
      const kernels::Vec8<T> packed = kernels::pack<T>(result);
      kernels::store_x8(dinput + offset, packed);
      if constexpr (kFp8 != 0) {
        kernels::unpack(packed, result);  // the bf16 values dinput holds
#pragma unroll
        for (int i = 0; i < kPackWidth; ++i) fp8_bits = max(fp8_bits, fp8::amax_bits(result[i]));
        if (site.delayed) {
          reinterpret_cast<uint2*>(fp8_out.q)[offset / kPackWidth] =
              kFp8 == 1 ? fp8::encode8<__NV_E4M3>(result, site.scale) : fp8::encode8<__NV_E5M2>(result, site.scale);
        }
      }
    }
  }
  if constexpr (kFp8 != 0) fp8::epilogue_end(site, fp8_bits, fp8_out.row, fp8_out.amax);
  if (partials == nullptr) return;  // frozen weight: no dw
  float* partial = partials + static_cast<int64_t>(blockIdx.x) * channels;
#pragma unroll
  for (int v = 0; v < kVectors; ++v) {
    const int vector = threadIdx.x + v * blockDim.x;
    if (vector >= vectors) continue;
    float4* target = reinterpret_cast<float4*>(partial + vector * kPackWidth);
    target[0] = make_float4(dweight[v][0], dweight[v][1], dweight[v][2], dweight[v][3]);
    target[1] = make_float4(dweight[v][4], dweight[v][5], dweight[v][6], dweight[v][7]);
  }
}

// The backward is latency-bound (a block reduction between the loads and the stores of each
// row): as few vectors per thread as 512 threads allow (one up to 4096 channels, two up to
// 8192) gives the SM more warps to overlap rows; the kernel is compiled per vector count to keep
// its register arrays that small. Wider rows fall back to four vectors and up to 1024 threads.
int backward_vectors_per_thread(int64_t channels) {
  const int64_t vectors = channels / kPackWidth;
  const int64_t per_thread = (vectors + 511) / 512;
  return static_cast<int>(per_thread <= 2 ? per_thread : kMaxVectorsPerThread);
}

int backward_threads_for(int64_t channels, int per_thread) {
  const int64_t vectors = channels / kPackWidth;
  return static_cast<int>(std::clamp<int64_t>(((vectors + per_thread - 1) / per_thread + 31) / 32 * 32, 32, 1024));
}

int threads_for(int64_t channels) {
  const int64_t vectors = channels / kPackWidth;
  const int64_t per_thread = (vectors + kMaxVectorsPerThread - 1) / kMaxVectorsPerThread;
  return static_cast<int>(std::clamp<int64_t>((per_thread + 31) / 32 * 32, 32, 1024));
}

// Rows at most this many take the staged forward (rmsnorm_forward_kernel's kStaged).
constexpr int64_t kStagedRows = 256;

// The plain or residual forward (kResidual), staged for few rows.
template <bool kResidual, typename T>
void launch_forward(T* out, T* residual_out, float* rstd, const T* residual_in, const T* input, const T* weight,
                    int64_t rows, int64_t channels, float epsilon, cudaStream_t stream) {
  auto kernel = rows <= kStagedRows ? rmsnorm_forward_kernel<kResidual, false, T, true>
                                    : rmsnorm_forward_kernel<kResidual, false, T, false>;
  launch_programmatic(kernel, dim3(static_cast<unsigned>(rows)), dim3(threads_for(channels)), 0, stream, true, out,
                      residual_out, rstd, residual_in, input, weight, static_cast<int>(channels), epsilon, Fp8Output{});
  CUDA_CHECK_LAUNCH();
}

void check_shape(int64_t channels) {
  CUDA_REQUIRE(channels % kPackWidth == 0, "rmsnorm: channels must be a multiple of 8");
  CUDA_REQUIRE(channels <= 1024 * kMaxVectorsPerThread * kPackWidth, "rmsnorm: channels must be at most 32768");
}

}  // namespace

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* input, const T* weight,
                     int64_t rows, int64_t channels, float epsilon, cudaStream_t stream) {
  check_shape(channels);
  if (rows == 0) return;
  launch_forward<false>(out, static_cast<T*>(nullptr), rstd, static_cast<const T*>(nullptr), input, weight, rows, channels,
                        epsilon, stream);
}

template <typename T>
void residual_rmsnorm_forward(T* out, T* residual_out, float* rstd,
                              const T* residual_in, const T* input,
                              const T* weight, int64_t rows, int64_t channels, float epsilon,
                              cudaStream_t stream) {
  check_shape(channels);
  if (rows == 0) return;
  launch_forward<true>(out, residual_out, rstd, residual_in, input, weight, rows, channels, epsilon, stream);
}

void rmsnorm_forward_fp8(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* input, const __nv_bfloat16* weight,
                         int64_t rows, int64_t channels, float epsilon, const Fp8Output& fp8_out, cudaStream_t stream) {
  check_shape(channels);
  CUDA_REQUIRE(out != nullptr || fp8_out.delayed_known, "rmsnorm_forward_fp8: no bf16 output only with a known delayed amax");
  if (rows == 0) return;
  rmsnorm_forward_kernel<false, true, __nv_bfloat16><<<static_cast<unsigned>(rows), threads_for(channels), 0, stream>>>(
      out, nullptr, rstd, nullptr, input, weight, static_cast<int>(channels), epsilon, fp8_out);
  CUDA_CHECK_LAUNCH();
  fp8_quantize_pending(out, rows * channels, fp8_out, stream);
}

void residual_rmsnorm_forward_fp8(__nv_bfloat16* out, __nv_bfloat16* residual_out, float* rstd,
                                  const __nv_bfloat16* residual_in, const __nv_bfloat16* input,
                                  const __nv_bfloat16* weight, int64_t rows, int64_t channels, float epsilon,
                                  const Fp8Output& fp8_out, cudaStream_t stream) {
  check_shape(channels);
  CUDA_REQUIRE(out != nullptr || fp8_out.delayed_known,
               "residual_rmsnorm_forward_fp8: no bf16 output only with a known delayed amax");
  if (rows == 0) return;
  rmsnorm_forward_kernel<true, true, __nv_bfloat16><<<static_cast<unsigned>(rows), threads_for(channels), 0, stream>>>(
      out, residual_out, rstd, residual_in, input, weight, static_cast<int>(channels), epsilon, fp8_out);
  CUDA_CHECK_LAUNCH();
  fp8_quantize_pending(out, rows * channels, fp8_out, stream);
}

int64_t rmsnorm_backward_scratch_floats(int64_t rows, int64_t channels) {
  return std::min(rows, kBackwardPartials) * channels;
}

template <typename T>
void rmsnorm_backward(T* dinput, float* dweight, float* scratch, const T* dout,
                      const typename NonDeduced<T>::type* dresidual, const T* input, const T* weight,
                      const float* rstd, int64_t rows, int64_t channels, cudaStream_t stream) {
  check_shape(channels);
  if (rows == 0) return;
  const int partial_count = static_cast<int>(std::min(rows, kBackwardPartials));
  const int per_thread = backward_vectors_per_thread(channels);
  const int threads = backward_threads_for(channels, per_thread);
  auto launch = [&](auto kernel) {
    kernel<<<partial_count, threads, 0, stream>>>(dinput, dweight ? scratch : nullptr, dout, dresidual, input, weight,
                                                  rstd, rows, static_cast<int>(channels), Fp8Output{});
  };
  if (per_thread == 1) launch(rmsnorm_backward_kernel<1, T>);
  else if (per_thread == 2) launch(rmsnorm_backward_kernel<2, T>);
  else launch(rmsnorm_backward_kernel<kMaxVectorsPerThread, T>);
  CUDA_CHECK_LAUNCH();
  if (dweight == nullptr) return;
  add_column_sums(dweight, scratch, partial_count, channels, stream);
}

void rmsnorm_backward_fp8(__nv_bfloat16* dinput, float* dweight, float* scratch, const __nv_bfloat16* dout,
                          const __nv_bfloat16* dresidual,
                          const __nv_bfloat16* input, const __nv_bfloat16* weight, const float* rstd, int64_t rows,
                          int64_t channels, const Fp8Output& fp8_out, cudaStream_t stream) {
  check_shape(channels);
  if (rows == 0) return;
  const int partial_count = static_cast<int>(std::min(rows, kBackwardPartials));
  const int per_thread = backward_vectors_per_thread(channels);
  const int threads = backward_threads_for(channels, per_thread);
  auto launch = [&](auto kernel) {
    kernel<<<partial_count, threads, 0, stream>>>(dinput, dweight ? scratch : nullptr, dout, dresidual, input, weight,
                                                  rstd, rows, static_cast<int>(channels), fp8_out);
  };
  using bf16 = __nv_bfloat16;
  const bool e4m3 = fp8_out.format == Fp8Target::E4M3;
  if (per_thread == 1) e4m3 ? launch(rmsnorm_backward_kernel<1, bf16, 1>) : launch(rmsnorm_backward_kernel<1, bf16, 2>);
  else if (per_thread == 2) e4m3 ? launch(rmsnorm_backward_kernel<2, bf16, 1>) : launch(rmsnorm_backward_kernel<2, bf16, 2>);
  else e4m3 ? launch(rmsnorm_backward_kernel<kMaxVectorsPerThread, bf16, 1>)
            : launch(rmsnorm_backward_kernel<kMaxVectorsPerThread, bf16, 2>);
  CUDA_CHECK_LAUNCH();
  fp8_quantize_pending(dinput, rows * channels, fp8_out, stream);
  if (dweight != nullptr) add_column_sums(dweight, scratch, partial_count, channels, stream);
}

#define INSTANTIATE(T)                                                                                     \
  template void rmsnorm_forward(T*, float*, const T*, const T*, int64_t, int64_t, float, cudaStream_t);       \
  template void residual_rmsnorm_forward(T*, T*, float*, const T*, const T*, const T*, int64_t, int64_t, float, \
                                         cudaStream_t);                                                      \
  template void rmsnorm_backward(T*, float*, float*, const T*, const T*, const T*, const T*, const float*,     \
                                 int64_t, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
