// AdamW update kernel (see adamw.h).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/adamw.h"

namespace surogate::cuda {
namespace {

__device__ __forceinline__ float adamw_element(float& master, float& m, float& v, float g, const AdamWStep& s) {
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  master = master * (1.0f - s.decay) - s.step_size * m / (sqrtf(v) * s.second_correction + s.epsilon);
  return master;
}

template <bool kVector>
__global__ void adamw_kernel(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                             const float* grad, const float* grad_scale, int64_t count, AdamWStep step) {
  const float scale = grad_scale ? *grad_scale : 1.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if constexpr (kVector) {
    for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < count / 4;
         index += stride) {
      float4 w = reinterpret_cast<float4*>(master)[index];
      float4 m = reinterpret_cast<float4*>(first_moment)[index];
      float4 v = reinterpret_cast<float4*>(second_moment)[index];
      const float4 g = reinterpret_cast<const float4*>(grad)[index];
      adamw_element(w.x, m.x, v.x, g.x * scale, step);
      adamw_element(w.y, m.y, v.y, g.y * scale, step);
      adamw_element(w.z, m.z, v.z, g.z * scale, step);
      adamw_element(w.w, m.w, v.w, g.w * scale, step);
      reinterpret_cast<float4*>(master)[index] = w;
      reinterpret_cast<float4*>(first_moment)[index] = m;
      reinterpret_cast<float4*>(second_moment)[index] = v;
      if (params) {
        __nv_bfloat162 low = __floats2bfloat162_rn(w.x, w.y), high = __floats2bfloat162_rn(w.z, w.w);
        uint2 packed;
        packed.x = *reinterpret_cast<uint32_t*>(&low);
        packed.y = *reinterpret_cast<uint32_t*>(&high);
        reinterpret_cast<uint2*>(params)[index] = packed;
      }
    }
  } else {
    for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < count;
         index += stride) {
      float w = master[index], m = first_moment[index], v = second_moment[index];
      adamw_element(w, m, v, grad[index] * scale, step);
      master[index] = w;
      first_moment[index] = m;
      second_moment[index] = v;
      if (params) params[index] = __float2bfloat16(w);
    }
  }
}

}  // namespace

void adamw_update(__nv_bfloat16* params, float* master, float* first_moment, float* second_moment,
                  const float* grad, const float* grad_scale, int64_t count, const AdamWStep& step,
                  cudaStream_t stream) {
  if (count == 0) return;
  constexpr int kThreads = 256;
  const bool vector = count % 4 == 0;
  const int64_t work = vector ? count / 4 : count;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, 65535));
  if (vector) {
    adamw_kernel<true><<<blocks, kThreads, 0, stream>>>(params, master, first_moment, second_moment, grad,
                                                        grad_scale, count, step);
  } else {
    adamw_kernel<false><<<blocks, kThreads, 0, stream>>>(params, master, first_moment, second_moment, grad,
                                                         grad_scale, count, step);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace surogate::cuda
