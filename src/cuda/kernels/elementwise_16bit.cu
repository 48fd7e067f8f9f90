// 16-bit elementwise kernels (E = bf16 or fp16, fp32 math, rounded once); see elementwise_16bit.h.
#include "cuda/kernels/elementwise_16bit.h"

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/elementwise_launch.cuh"

namespace surogate::cuda {
namespace {

using bf16 = __nv_bfloat16;
using kernels::ElementTraits;
using kernels::from_float;
using kernels::grid_for;
using kernels::kThreads;
using kernels::launch;
using kernels::to_float;

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

__global__ void scalar_product_kernel(const float* a, const float* b, float* out) { out[0] = a[0] * b[0]; }

// 8 elements per vector (16 bytes) when the count is a multiple of 8 and every pointer is aligned.
bool vectorizable(int64_t count, const void* a, const void* b, const void* c) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return count % 8 == 0 && aligned(a) && aligned(b) && aligned(c);
}

// factor_on_device, when set, replaces factor (a graph scalar, read on the device).
template <typename E>
__global__ void scale_kernel(const E* x, float factor, const float* factor_on_device, E* out, int64_t count,
                                  bool vector) {
  if (factor_on_device != nullptr) factor = *factor_on_device;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector) {
    for (int64_t v = first; v < count / 8; v += stride) {
      uint4 packed = reinterpret_cast<const uint4*>(x)[v];
      using Traits = ElementTraits<E>;
      typename Traits::Pair* pairs = reinterpret_cast<typename Traits::Pair*>(&packed);
      for (int j = 0; j < 4; ++j) {
        const float2 f = Traits::to_float2(pairs[j]);
        pairs[j] = Traits::from_floats(f.x * factor, f.y * factor);
      }
      reinterpret_cast<uint4*>(out)[v] = packed;
    }
    return;
  }
  for (int64_t i = first; i < count; i += stride) out[i] = from_float<E>(to_float(x[i]) * factor);
}

__global__ void convert_bf16_to_f32_kernel(const bf16* in, float* out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = __bfloat162float(in[i]);
  }
}

}  // namespace

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

template <typename E>
void scale_16bit(const E* x, float factor, E* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const bool vector = vectorizable(count, x, x, out);
  scale_kernel<E><<<grid_for(vector ? count / 8 : count), kThreads, 0, stream>>>(x, factor, nullptr, out, count,
                                                                                   vector);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void scale_16bit_by(const E* x, const float* factor, E* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const bool vector = vectorizable(count, x, x, out);
  scale_kernel<E><<<grid_for(vector ? count / 8 : count), kThreads, 0, stream>>>(x, 0.0f, factor, out, count,
                                                                                   vector);
  CUDA_CHECK_LAUNCH();
}

void convert_bf16_to_f32(const bf16* in, float* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  convert_bf16_to_f32_kernel<<<grid_for(count), kThreads, 0, stream>>>(in, out, count);
  CUDA_CHECK_LAUNCH();
}

void scalar_product(const float* a, const float* b, float* out, cudaStream_t stream) {
  scalar_product_kernel<<<1, 1, 0, stream>>>(a, b, out);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                                                      \
  template void add_16bit(const E*, const E*, E*, int64_t, cudaStream_t);                                    \
  template void accumulate_16bit(const E*, E*, int64_t, cudaStream_t);                                       \
  template void fill_16bit(float, E*, int64_t, cudaStream_t);                                                \
  template void convert_from_f32(const float*, E*, int64_t, cudaStream_t);                                   \
  template void scale_16bit(const E*, float, E*, int64_t, cudaStream_t);                                     \
  template void scale_16bit_by(const E*, const float*, E*, int64_t, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
