// SwiGLU kernels (see swiglu.h).
#include "cuda/cuda_check.h"
#include "cuda/kernels/fp8_epilogue.cuh"
#include "cuda/kernels/swiglu.h"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda {
namespace {

using kernels::kPackWidth;

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

// silu(gate) · up of the 8 values at gate / up, in fp32.
template <typename T>
__device__ __forceinline__ void swiglu_values(const T* gate, const T* up, float y[kPackWidth]) {
  float g[kPackWidth], u[kPackWidth];
  kernels::unpack(kernels::load_x8(gate), g);
  kernels::unpack(kernels::load_x8(up), u);
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) y[i] = g[i] * sigmoid(g[i]) * u[i];
}

// The elementwise backward of 8 values (swiglu.h's formulas), in fp32.
__device__ __forceinline__ void swiglu_gradients(const float g[kPackWidth], const float u[kPackWidth],
                                                 const float dy[kPackWidth], float dg[kPackWidth], float du[kPackWidth]) {
#pragma unroll
  for (int i = 0; i < kPackWidth; ++i) {
    const float s = sigmoid(g[i]);
    du[i] = dy[i] * g[i] * s;
    dg[i] = dy[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
  }
}

template <typename T>
__global__ void swiglu_forward_kernel(T* out, const T* gate, const T* up,
                                      int64_t rows, int64_t channels, int64_t stride) {
  const int64_t vectors_per_row = channels / kPackWidth;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * vectors_per_row) return;
  const int64_t row = index / vectors_per_row, column = (index % vectors_per_row) * kPackWidth;
  float y[kPackWidth];
  swiglu_values(gate + row * stride + column, up + row * stride + column, y);
  kernels::store_x8(out + row * channels + column, kernels::pack<T>(y));
}

// The forward in bf16 that also writes the E4M3 codes of `out` (fp8_epilogue.cuh): no early
// return, every thread reaches the block's max. Grid-stride over fp8::epilogue_blocks blocks, so
// that the max's reduction runs once per block of the wave, not once per 2,048 values.
__global__ void swiglu_forward_fp8_kernel(__nv_bfloat16* out, const __nv_bfloat16* gate, const __nv_bfloat16* up,
                                          int64_t rows, int64_t channels, int64_t stride, Fp8Output fp8_out) {
  const fp8::EpilogueState site = fp8::epilogue_begin(fp8_out.row, fp8_out.scale_inv, blockIdx.x == 0);
  const int64_t vectors_per_row = channels / kPackWidth;
  unsigned bits = 0;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < rows * vectors_per_row;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / vectors_per_row, column = (index % vectors_per_row) * kPackWidth;
    float y[kPackWidth];
    swiglu_values(gate + row * stride + column, up + row * stride + column, y);
    const kernels::Vec8<__nv_bfloat16> packed = kernels::pack<__nv_bfloat16>(y);
    if (out != nullptr) kernels::store_x8(out + row * channels + column, packed);
    kernels::unpack(packed, y);  // the bf16 values `out` holds
#pragma unroll
    for (int i = 0; i < kPackWidth; ++i) bits = max(bits, fp8::amax_bits(y[i]));
    if (site.delayed) reinterpret_cast<uint2*>(fp8_out.q)[index] = fp8::encode8_e4m3(y, site.scale);
  }
  fp8::epilogue_end(site, bits, fp8_out.row, fp8_out.amax);
}

template <typename T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dout,
                                       const T* gate, const T* up, int64_t rows,
                                       int64_t channels, int64_t stride) {
  const int64_t vectors_per_row = channels / kPackWidth;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * vectors_per_row) return;
  const int64_t row = index / vectors_per_row, column = (index % vectors_per_row) * kPackWidth;
  float g[kPackWidth], u[kPackWidth], dy[kPackWidth], dg[kPackWidth], du[kPackWidth];
  kernels::unpack(kernels::load_x8(gate + row * stride + column), g);
  kernels::unpack(kernels::load_x8(up + row * stride + column), u);
  kernels::unpack(kernels::load_x8(dout + row * channels + column), dy);
  swiglu_gradients(g, u, dy, dg, du);
  kernels::store_x8(dgate + row * stride + column, kernels::pack<T>(dg));
  kernels::store_x8(dup + row * stride + column, kernels::pack<T>(du));
}

// One value per thread, for widths that are not a multiple of 8 (Qwen2.5-VL-7B's vision MLP is
// 3420 wide): the same fp32 formulas and one rounding, so a row's values equal the vector path's.
template <typename T>
__global__ void swiglu_forward_scalar_kernel(T* out, const T* gate, const T* up, int64_t rows, int64_t channels,
                                             int64_t stride) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * channels) return;
  const int64_t row = index / channels, column = index % channels;
  const float g = kernels::ElementTraits<T>::to_float(gate[row * stride + column]), u = kernels::ElementTraits<T>::to_float(up[row * stride + column]);
  out[index] = kernels::ElementTraits<T>::from_float(g * sigmoid(g) * u);
}

template <typename T>
__global__ void swiglu_backward_scalar_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t rows,
                                              int64_t channels, int64_t stride) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * channels) return;
  const int64_t row = index / channels, column = index % channels, at = row * stride + column;
  using E = kernels::ElementTraits<T>;
  const float g = E::to_float(gate[at]), u = E::to_float(up[at]), dy = E::to_float(dout[index]), s = sigmoid(g);
  dup[at] = E::from_float(dy * g * s);
  dgate[at] = E::from_float(dy * u * s * (1.0f + g * (1.0f - s)));
}

bool vector_width(int64_t channels, int64_t stride) { return channels % kPackWidth == 0 && stride % kPackWidth == 0; }

// The backward in bf16 that also writes the codes of d_gate and d_up, each at its own site
// (fp8_epilogue.cuh). Rows are contiguous (stride = channels): the codes are indexed like `out`.
template <__nv_fp8_interpretation_t kFormat>
__global__ void swiglu_backward_fp8_kernel(__nv_bfloat16* dgate, __nv_bfloat16* dup, const __nv_bfloat16* dout,
                                           const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                                           int64_t channels, float format_max, Fp8Output gate_out, Fp8Output up_out) {
  const bool first = blockIdx.x == 0;
  const fp8::EpilogueState gate_site = fp8::epilogue_begin(gate_out.row, gate_out.scale_inv, first, format_max);
  const fp8::EpilogueState up_site = fp8::epilogue_begin(up_out.row, up_out.scale_inv, first, format_max);
  const int64_t vectors_per_row = channels / kPackWidth;
  unsigned gate_bits = 0, up_bits = 0;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < rows * vectors_per_row;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t offset = index * kPackWidth;
    float g[kPackWidth], u[kPackWidth], dy[kPackWidth], dg[kPackWidth], du[kPackWidth];
    kernels::unpack(kernels::load_x8(gate + offset), g);
    kernels::unpack(kernels::load_x8(up + offset), u);
    kernels::unpack(kernels::load_x8(dout + offset), dy);
    swiglu_gradients(g, u, dy, dg, du);
    const kernels::Vec8<__nv_bfloat16> dg_packed = kernels::pack<__nv_bfloat16>(dg);
    const kernels::Vec8<__nv_bfloat16> du_packed = kernels::pack<__nv_bfloat16>(du);
    if (dgate != nullptr) kernels::store_x8(dgate + offset, dg_packed);
    if (dup != nullptr) kernels::store_x8(dup + offset, du_packed);
    kernels::unpack(dg_packed, dg);  // the bf16 values the gradients hold
    kernels::unpack(du_packed, du);
#pragma unroll
    for (int i = 0; i < kPackWidth; ++i) {
      gate_bits = max(gate_bits, fp8::amax_bits(dg[i]));
      up_bits = max(up_bits, fp8::amax_bits(du[i]));
    }
    if (gate_site.delayed) reinterpret_cast<uint2*>(gate_out.q)[index] = fp8::encode8<kFormat>(dg, gate_site.scale);
    if (up_site.delayed) reinterpret_cast<uint2*>(up_out.q)[index] = fp8::encode8<kFormat>(du, up_site.scale);
  }
  fp8::epilogue_end(gate_site, gate_bits, gate_out.row, gate_out.amax);
  fp8::epilogue_end(up_site, up_bits, up_out.row, up_out.amax);
}

void check_shape(int64_t channels, int64_t stride) {
  CUDA_REQUIRE(channels % kPackWidth == 0 && stride % kPackWidth == 0,
               "swiglu: channels and input_stride must be multiples of 8");
  CUDA_REQUIRE(stride >= channels, "swiglu: input_stride must be at least channels");
}

}  // namespace

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t rows,
                    int64_t channels, int64_t input_stride, cudaStream_t stream) {
  CUDA_REQUIRE(input_stride >= channels, "swiglu: input_stride must be at least channels");
  if (!vector_width(channels, input_stride)) {
    const int64_t values = rows * channels;
    if (values == 0) return;
    swiglu_forward_scalar_kernel<<<static_cast<unsigned>((values + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        out, gate, up, rows, channels, input_stride);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t work = rows * channels / kPackWidth;
  if (work == 0) return;
  swiglu_forward_kernel<<<static_cast<unsigned>((work + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      out, gate, up, rows, channels, input_stride);
  CUDA_CHECK_LAUNCH();
}

void swiglu_forward_fp8(__nv_bfloat16* out, const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                        int64_t channels, int64_t input_stride, const Fp8Output& fp8_out, cudaStream_t stream) {
  check_shape(channels, input_stride);
  CUDA_REQUIRE(out != nullptr || fp8_out.delayed_known, "swiglu_forward_fp8: no bf16 output only with a known delayed amax");
  const int64_t work = rows * channels / kPackWidth;
  if (work == 0) return;
  swiglu_forward_fp8_kernel<<<fp8::epilogue_blocks(work, kThreads), kThreads, 0, stream>>>(out, gate, up, rows, channels,
                                                                                         input_stride, fp8_out);
  CUDA_CHECK_LAUNCH();
  fp8_quantize_pending(out, rows * channels, fp8_out, stream);
}

void swiglu_backward_fp8(__nv_bfloat16* dgate, __nv_bfloat16* dup, const __nv_bfloat16* dout, const __nv_bfloat16* gate,
                         const __nv_bfloat16* up, int64_t rows, int64_t channels, const Fp8Output& gate_out,
                         const Fp8Output& up_out, cudaStream_t stream) {
  check_shape(channels, channels);
  CUDA_REQUIRE(gate_out.format == up_out.format, "swiglu_backward_fp8: both gradients take one format");
  CUDA_REQUIRE((dgate != nullptr || gate_out.delayed_known) && (dup != nullptr || up_out.delayed_known),
               "swiglu_backward_fp8: no bf16 gradient only with a known delayed amax");
  const int64_t work = rows * channels / kPackWidth;
  if (work == 0) return;
  const unsigned blocks = fp8::epilogue_blocks(work, kThreads);
  if (gate_out.format == Fp8Target::E4M3) {
    swiglu_backward_fp8_kernel<__NV_E4M3><<<blocks, kThreads, 0, stream>>>(dgate, dup, dout, gate, up, rows, channels,
                                                                          448.0f, gate_out, up_out);
  } else {
    swiglu_backward_fp8_kernel<__NV_E5M2><<<blocks, kThreads, 0, stream>>>(dgate, dup, dout, gate, up, rows, channels,
                                                                          57344.0f, gate_out, up_out);
  }
  CUDA_CHECK_LAUNCH();
  fp8_quantize_pending(dgate, rows * channels, gate_out, stream);
  fp8_quantize_pending(dup, rows * channels, up_out, stream);
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout,
                     const T* gate, const T* up, int64_t rows, int64_t channels,
                     int64_t input_stride, cudaStream_t stream) {
  CUDA_REQUIRE(input_stride >= channels, "swiglu: input_stride must be at least channels");
  if (!vector_width(channels, input_stride)) {
    const int64_t values = rows * channels;
    if (values == 0) return;
    swiglu_backward_scalar_kernel<<<static_cast<unsigned>((values + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        dgate, dup, dout, gate, up, rows, channels, input_stride);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t work = rows * channels / kPackWidth;
  if (work == 0) return;
  swiglu_backward_kernel<<<static_cast<unsigned>((work + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      dgate, dup, dout, gate, up, rows, channels, input_stride);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(T)                                                                             \
  template void swiglu_forward(T*, const T*, const T*, int64_t, int64_t, int64_t, cudaStream_t); \
  template void swiglu_backward(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
