// AdamW update kernel (see adamw.h).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/adamw.h"
#include "cuda/kernels/optimizer_precision.cuh"

namespace surogate::cuda {
namespace {

__device__ __forceinline__ float adamw_element(float w, float& m, float& v, float g, const AdamWStep& s) {
  m = __fadd_rn(__fmul_rn(s.beta1, m), __fmul_rn(__fsub_rn(1.0f, s.beta1), g));
  v = __fadd_rn(__fmul_rn(s.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), g), g));
  const float denominator = __fadd_rn(__fmul_rn(__fsqrt_rn(v), s.second_correction), s.epsilon);
  return __fsub_rn(__fmul_rn(w, __fsub_rn(1.0f, s.decay)), __fdiv_rn(__fmul_rn(s.step_size, m), denominator));
}

// kMaster: fp32 master weights (else the bf16 params are the master, stochastically rounded).
template <bool kVector, bool kMaster, typename Grad>
__global__ void adamw_kernel(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                             const Grad* grad, const float* grad_scale, int64_t count, AdamWStep step) {
  const float scale = grad_scale ? *grad_scale : 1.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if constexpr (kVector) {
    for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < count / 4;
         index += stride) {
      float4 w = kMaster ? reinterpret_cast<float4*>(master)[index] : kernels::load4(params, index);
      float4 m = reinterpret_cast<float4*>(first_moment)[index];
      float4 v = reinterpret_cast<float4*>(second_moment)[index];
      const float4 g = kernels::load4(grad, index);
      w.x = adamw_element(w.x, m.x, v.x, __fmul_rn(g.x, scale), step);
      w.y = adamw_element(w.y, m.y, v.y, __fmul_rn(g.y, scale), step);
      w.z = adamw_element(w.z, m.z, v.z, __fmul_rn(g.z, scale), step);
      w.w = adamw_element(w.w, m.w, v.w, __fmul_rn(g.w, scale), step);
      reinterpret_cast<float4*>(first_moment)[index] = m;
      reinterpret_cast<float4*>(second_moment)[index] = v;
      __nv_bfloat162 low, high;
      if constexpr (kMaster) {
        reinterpret_cast<float4*>(master)[index] = w;
        if (!params) continue;
        low = __floats2bfloat162_rn(w.x, w.y);
        high = __floats2bfloat162_rn(w.z, w.w);
      } else {
        const int64_t first = 4 * index;
        low = __halves2bfloat162(kernels::stochastic_bf16(w.x, step.rounding_key, first),
                                 kernels::stochastic_bf16(w.y, step.rounding_key, first + 1));
        high = __halves2bfloat162(kernels::stochastic_bf16(w.z, step.rounding_key, first + 2),
                                  kernels::stochastic_bf16(w.w, step.rounding_key, first + 3));
      }
      uint2 packed;
      packed.x = *reinterpret_cast<uint32_t*>(&low);
      packed.y = *reinterpret_cast<uint32_t*>(&high);
      reinterpret_cast<uint2*>(params)[index] = packed;
    }
  } else {
    for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < count;
         index += stride) {
      float m = first_moment[index], v = second_moment[index];
      const float old = kMaster ? master[index] : __bfloat162float(params[index]);
      const float w = adamw_element(old, m, v, __fmul_rn(kernels::load_gradient(grad, index), scale), step);
      first_moment[index] = m;
      second_moment[index] = v;
      if constexpr (kMaster) {
        master[index] = w;
        if (params) params[index] = __float2bfloat16(w);
      } else {
        params[index] = kernels::stochastic_bf16(w, step.rounding_key, index);
      }
    }
  }
}

template <bool kMaster, typename Grad>
void launch(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment, const Grad* grad,
            const float* grad_scale, int64_t count, const AdamWStep& step, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const bool vector = count % 4 == 0;
  const int64_t work = vector ? count / 4 : count;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, 65535));
  if (vector) {
    adamw_kernel<true, kMaster><<<blocks, kThreads, 0, stream>>>(params, master, first_moment, second_moment, grad,
                                                                 grad_scale, count, step);
  } else {
    adamw_kernel<false, kMaster><<<blocks, kThreads, 0, stream>>>(params, master, first_moment, second_moment, grad,
                                                                  grad_scale, count, step);
  }
  CUDA_CHECK_LAUNCH();
}

template <typename Grad>
void dispatch(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment, const Grad* grad,
              const float* grad_scale, int64_t count, const AdamWStep& step, cudaStream_t stream) {
  if (count == 0) return;
  if (master) {
    launch<true>(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
  } else {
    CUDA_REQUIRE(params != nullptr, "adamw_update: a bf16 master (null master) needs the bf16 params");
    launch<false>(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
  }
}

}  // namespace

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const float* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream) {
  dispatch(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
}

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const __nv_bfloat16* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream) {
  dispatch(params, master, first_moment, second_moment, grad, grad_scale, count, step, stream);
}

}  // namespace surogate::cuda
